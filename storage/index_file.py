"""An append-only index file mirrored in memory (shared by the offset and time indexes).

Entries are kept in a bytearray; lookups are binary searches over it. The file holds a prefix of those entries:
new ones reach it in writes of at least ``WRITE_BATCH_BYTES`` (not one write per append) and all of them at
``write_pending`` (the log calls it when a segment stops being active) and ``close``. The file is written without
preallocation, so it is always whole entries and never needs trimming on roll or close.

Nothing reads the file while the broker runs, and after a crash the active segment's indexes are rebuilt from
the log anyway (``recovery``); a trusted segment whose file lacks entries fails ``LogSegment.load``'s check and is
rebuilt too.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Sequence
from pathlib import Path

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")
#: New entries are written once this many bytes of them are waiting (a page: 512 offset or 341 time entries).
WRITE_BATCH_BYTES = 4096


class IndexCorruptError(Exception):
    """An index file failed its sanity check; the caller rebuilds it from the log."""


#: Buffers one writev may take (Linux's IOV_MAX).
_IOV_MAX = os.sysconf("SC_IOV_MAX")


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """os.write until every byte is written (short writes happen near ENOSPC)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def write_all_vectored(fd: int, pieces: Sequence[bytes | bytearray | memoryview]) -> None:
    """os.writev of ``pieces`` in order until every byte is written (at most IOV_MAX buffers per call; short
    writes continue where they stopped)."""
    views = [memoryview(piece) for piece in pieces if len(piece)]
    first = 0
    while first < len(views):
        written = os.writev(fd, views[first : first + _IOV_MAX])
        while first < len(views) and written >= len(views[first]):
            written -= len(views[first])
            first += 1
        if written:
            views[first] = views[first][written:]


class IndexFile:
    """Shared file handling of the offset and time indexes: an append-only file mirrored in memory."""

    entry: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry.size)
        self.data = bytearray()
        #: Bytes of ``data`` that are in the file; the rest are waiting for ``write_pending``.
        self.written = 0
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    @property
    def entries(self) -> int:
        return len(self.data) // self.entry.size

    @property
    def is_full(self) -> bool:
        return self.entries >= self.max_entries

    def load(self) -> None:
        """Read the file into memory; raises IndexCorruptError when its length is not whole entries."""
        size = os.fstat(self.fd).st_size
        data = os.pread(self.fd, size, 0) if size else b""
        if len(data) % self.entry.size:
            raise IndexCorruptError(f"{self.path}: size {len(data)} is not a multiple of {self.entry.size}")
        self.data = bytearray(data)
        self.written = len(data)

    def entry_at(self, n: int) -> tuple[int, int]:
        return self.entry.unpack_from(self.data, n * self.entry.size)

    def write_pending(self) -> None:
        """Write every entry not yet in the file (one write). On OSError the file is cut back to its entries."""
        if len(self.data) > self.written:
            try:
                write_all(self.fd, self.data[self.written :])
            except OSError:
                with contextlib.suppress(OSError):
                    os.ftruncate(self.fd, self.written)
                raise
            self.written = len(self.data)

    def write_if_due(self) -> None:
        """``write_pending`` once ``WRITE_BATCH_BYTES`` of entries are waiting."""
        if len(self.data) - self.written >= WRITE_BATCH_BYTES:
            self.write_pending()

    def replace(self, data: bytes | bytearray) -> None:
        """Replace the whole index (rebuild/truncation): truncate the file and write ``data``."""
        self.data = bytearray(data)
        self.written = 0
        os.ftruncate(self.fd, 0)
        self.write_pending()

    def discard_after(self, length: int) -> None:
        """Forget entries past ``length`` bytes, in memory and in the file (undo of a failed append)."""
        del self.data[length:]
        if length < self.written:
            self.written = length
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, length)

    def fsync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            self.write_pending()
            os.close(self.fd)
            self.fd = -1
