"""Aborted-transaction index (``.txnindex``) of one segment (Kafka's TransactionIndex / AbortedTxn).

File format (Kafka's), big-endian, entries appended in marker order, no header::

    version: int16 (0) | producer_id: int64 | first_offset: int64 | last_offset: int64 | last_stable_offset: int64

``last_offset`` is the offset of the ABORT marker (it lives in this index's segment); ``first_offset`` is the
transaction's first offset (possibly in an earlier segment); ``last_stable_offset`` is the partition's LSO right
after the marker (first offset of the oldest other ongoing transaction, else marker offset + 1).

Guarantees: entries are mirrored in memory; ``append`` writes them with one ``write``; last offsets strictly
increase (ValueError otherwise). Unlike Kafka the file is created with its segment (empty), so a missing file
next to a non-empty ``.log`` means the index was lost and must be rebuilt.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from oncelog.storage.index_file import IndexCorruptError, write_all

ABORTED_TXN_VERSION = 0  # AbortedTxn.CURRENT_VERSION
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # AbortedTxn.TOTAL_SIZE = 34


class AbortedTxn(NamedTuple):
    """One aborted transaction: its producer, offset range (marker included) and the LSO after it."""

    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(
            ABORTED_TXN_VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


def encode_entries(entries: Iterable[AbortedTxn]) -> bytes:
    return b"".join(entry.encode() for entry in entries)


class TransactionIndex:
    """The ``.txnindex`` of the segment starting at ``base_offset``."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.existed = path.exists()
        self.entries: list[AbortedTxn] = []
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    @property
    def last_offset(self) -> int | None:
        return self.entries[-1].last_offset if self.entries else None

    def load(self, next_offset: int) -> None:
        """Read the file; raises IndexCorruptError for a partial entry, an unknown version, or last offsets
        that do not strictly increase inside [base_offset, ``next_offset``)."""
        size = os.fstat(self.fd).st_size
        data = os.pread(self.fd, size, 0) if size else b""
        if len(data) % ENTRY_SIZE:
            raise IndexCorruptError(f"{self.path}: size {len(data)} is not a multiple of {ENTRY_SIZE}")
        entries = []
        previous = self.base_offset - 1
        for version, pid, first, last, lso in _ENTRY.iter_unpack(data):
            if version != ABORTED_TXN_VERSION:
                raise IndexCorruptError(f"{self.path}: unknown aborted transaction version {version}")
            if not previous < last < next_offset or first > last:
                raise IndexCorruptError(f"{self.path}: entry ({pid}, {first}, {last}) is out of order or range")
            entries.append(AbortedTxn(pid, first, last, lso))
            previous = last
        self.entries = entries

    def append(self, entries: list[AbortedTxn]) -> None:
        """Append entries (one write). Raises ValueError when a last offset does not increase, OSError on I/O."""
        if not entries:
            return
        previous = self.last_offset
        for entry in entries:
            if previous is not None and entry.last_offset <= previous:
                raise ValueError(f"{self.path}: last offset {entry.last_offset} does not follow {previous}")
            previous = entry.last_offset
        write_all(self.fd, encode_entries(entries))
        self.entries.extend(entries)

    def discard_after(self, count: int) -> None:
        """Keep the first ``count`` entries, in memory and in the file (undo of a failed append)."""
        del self.entries[count:]
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, count * ENTRY_SIZE)

    def replace(self, entries: list[AbortedTxn]) -> None:
        """Rewrite the whole file with ``entries`` (after a rebuild)."""
        os.ftruncate(self.fd, 0)
        write_all(self.fd, encode_entries(entries))
        self.entries = list(entries)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or above ``offset``."""
        keep = 0
        while keep < len(self.entries) and self.entries[keep].last_offset < offset:
            keep += 1
        if keep < len(self.entries):
            del self.entries[keep:]
            os.ftruncate(self.fd, keep * ENTRY_SIZE)

    def collect(self, start_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [start_offset, upper_bound_offset), and whether the search is complete (an
        entry's last stable offset reached the upper bound, so no later entry can start below it)."""
        found = []
        for entry in self.entries:
            if entry.last_offset >= start_offset and entry.first_offset < upper_bound_offset:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound_offset:
                return found, True
        return found, False

    def fsync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
