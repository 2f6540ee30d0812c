"""An append-only index file mirrored in memory (shared by the offset and time indexes).

Entries are kept in a bytearray that mirrors the file; new entries are appended to the file without
preallocation, so the file is always exactly ``entry size * entries`` bytes and never needs trimming on roll
or close. Lookups are binary searches over the in-memory copy.
"""

from __future__ import annotations

import contextlib
import os
import struct
from pathlib import Path

OFFSET_ENTRY = struct.Struct(">ii")
TIME_ENTRY = struct.Struct(">qi")


class IndexCorruptError(Exception):
    """An index file failed its sanity check; the caller rebuilds it from the log."""


def write_all(fd: int, data: bytes | bytearray | memoryview) -> None:
    """os.write until every byte is written (short writes happen near ENOSPC)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


class IndexFile:
    """Shared file handling of the offset and time indexes: an append-only file mirrored in memory."""

    entry: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_size: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_size // self.entry.size)
        self.data = bytearray()
        self._pending = bytearray()
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

    def entry_at(self, n: int) -> tuple[int, int]:
        return self.entry.unpack_from(self.data, n * self.entry.size)

    def write_pending(self) -> None:
        """Append entries added since the last call to the file (one write)."""
        if self._pending:
            write_all(self.fd, self._pending)
            self._pending = bytearray()

    def replace(self, data: bytes | bytearray) -> None:
        """Replace the whole index (rebuild/truncation): truncate the file and write ``data``."""
        self.data = bytearray(data)
        self._pending = bytearray()
        os.ftruncate(self.fd, 0)
        write_all(self.fd, self.data)

    def discard_after(self, length: int) -> None:
        """Forget entries past ``length`` bytes, in memory and in the file (undo of a failed append)."""
        del self.data[length:]
        self._pending = bytearray()
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, length)

    def fsync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            self.write_pending()
            os.close(self.fd)
            self.fd = -1
