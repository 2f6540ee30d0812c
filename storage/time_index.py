"""Time index (``.timeindex``): 12-byte entries ``timestamp: int64 | relative offset: int32``.

An entry ``(t, o)`` means: the largest batch max-timestamp up to the indexed batch is ``t`` and ``o`` is the
last offset of the first batch that reached it. Timestamps strictly increase (Kafka's ``maybeAppend``).
Entries are written alongside offset-index entries only (no extra entry on roll or close; the segment's
largest timestamp is recomputed on open from the last entry plus the short tail after it).
"""

from __future__ import annotations

from oncelog.storage.index_file import TIME_ENTRY, IndexCorruptError, IndexFile


class TimeIndex(IndexFile):
    """Max timestamp so far -> relative offset, appended when the max timestamp grows."""

    entry = TIME_ENTRY

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, absolute offset) of the last entry, or None when empty."""
        if not self.data:
            return None
        ts, rel = self.entry_at(self.entries - 1)
        return ts, self.base_offset + rel

    def maybe_append(self, timestamp: int, offset: int) -> None:
        """Add an entry when ``timestamp`` exceeds the last one and the index is not full."""
        if self.is_full:
            return
        last = self.last_entry()
        if last is not None and timestamp <= last[0]:
            return
        raw = self.entry.pack(timestamp, offset - self.base_offset)
        self.data += raw

    def sanity_check(self, next_offset: int) -> None:
        """Raise IndexCorruptError unless timestamps strictly increase and offsets are in the segment."""
        last_ts, last_rel = None, -1
        for n in range(self.entries):
            ts, rel = self.entry_at(n)
            if (last_ts is not None and ts <= last_ts) or rel < last_rel or self.base_offset + rel >= next_offset:
                raise IndexCorruptError(f"{self.path}: entry {n} ({ts}, {rel}) is out of order or range")
            last_ts, last_rel = ts, rel

    def lookup(self, timestamp: int) -> int | None:
        """Absolute offset of the last entry whose timestamp is < ``timestamp``; None when there is none."""
        lo, hi = 0, self.entries - 1
        found = None
        while lo <= hi:
            mid = (lo + hi) // 2
            ts, rel = self.entry_at(mid)
            if ts < timestamp:
                found = self.base_offset + rel
                lo = mid + 1
            else:
                hi = mid - 1
        return found
