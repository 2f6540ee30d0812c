"""Sparse offset index (``.index``): 8-byte entries ``relative offset: int32 | position: int32``.

An entry maps the *last* offset of a batch to the file position of that batch, so the floor entry of any
offset points at or before the batch holding it. See ``index_file`` for the file handling.
"""

from __future__ import annotations

from oncelog.storage.index_file import OFFSET_ENTRY, IndexCorruptError, IndexFile


class OffsetIndex(IndexFile):
    """Relative offset -> file position, one entry per ``log.index.interval.bytes`` appended."""

    entry = OFFSET_ENTRY

    def append(self, offset: int, position: int) -> None:
        """Add an entry (the file gets it later: see ``index_file``). Ignored when the index is full."""
        if self.is_full:
            return
        raw = self.entry.pack(offset - self.base_offset, position)
        self.data += raw

    def sanity_check(self, log_size: int) -> None:
        """Raise IndexCorruptError unless offsets and positions strictly increase and stay inside the log."""
        last_rel, last_pos = -1, -1
        for n in range(self.entries):
            rel, pos = self.entry_at(n)
            if rel <= last_rel or pos <= last_pos or pos >= log_size or rel < 0:
                raise IndexCorruptError(f"{self.path}: entry {n} ({rel}, {pos}) is out of order or range")
            last_rel, last_pos = rel, pos

    def last_entry(self) -> tuple[int, int] | None:
        """(absolute offset, position) of the last entry, or None when empty."""
        if not self.data:
            return None
        rel, pos = self.entry_at(self.entries - 1)
        return self.base_offset + rel, pos

    def lookup(self, offset: int) -> int:
        """Position of the largest entry whose offset is <= ``offset``; 0 when none is."""
        target = offset - self.base_offset
        lo, hi = 0, self.entries - 1
        found = 0
        while lo <= hi:
            mid = (lo + hi) // 2
            rel, pos = self.entry_at(mid)
            if rel <= target:
                found = pos
                lo = mid + 1
            else:
                hi = mid - 1
        return found
