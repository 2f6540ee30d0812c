"""A partition's leader-epoch cache (KIP-101): where each leader epoch's records start, kept in
``leader-epoch-checkpoint``.

Every batch carries the leader epoch of the leader that appended it (``partitionLeaderEpoch``). The cache maps each
epoch to the offset of its first batch, so a replica can answer OffsetForLeaderEpoch: "where did epoch E end?" is
the start of the next epoch (or the log end for the latest one). A follower that becomes one after a leader change
asks the new leader that for its own latest epoch and truncates what it holds beyond the answer (KIP-101, KIP-279),
and consumers check their positions the same way (KIP-320). Rules of Kafka's ``LeaderEpochFileCache``:

- ``assign(epoch, start)`` adds an entry only when the epoch is new or starts earlier than the latest entry, first
  dropping every entry (from the latest back) whose epoch is not lower or whose start is not lower: the entries stay
  strictly increasing in both epoch and start offset. New entries are written to the checkpoint before returning.
- ``truncate_from_end(end)`` drops entries starting at or after ``end`` (the log was truncated to ``end``).
- ``truncate_from_start(start)`` drops entries wholly before ``start``, moving the last of them to start at ``start``
  (the log start rose: retention or DeleteRecords).
- Every change is written before the method returns (fsync, then atomic rename); calls that change nothing write
  nothing.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from oncelog.storage.checkpoint import atomic_write, encode_checkpoint, read_checkpoint
from oncelog.storage.errors import StorageError

#: The file's name in each partition directory, as Kafka names it.
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
#: The epoch of a partition's first leader (Kafka's LeaderAndIsr.InitialLeaderEpoch); a single node keeps it.
INITIAL_LEADER_EPOCH = 0
#: OffsetForLeaderEpoch's answer when the epoch is unknown (Kafka's UNDEFINED_EPOCH / UNDEFINED_EPOCH_OFFSET).
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    """Epoch ``epoch``'s first batch is at ``start_offset``."""

    epoch: int
    start_offset: int


class EpochEndOffset(NamedTuple):
    """OffsetForLeaderEpoch's answer: the largest epoch known at or below the one asked for, and where it ended."""

    epoch: int
    end_offset: int


class LeaderEpochCache:
    """The epochs of one partition's log; ``path`` is its ``leader-epoch-checkpoint`` (read when built)."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._entries: list[EpochEntry] = []
        for epoch, start in self._read():
            self._assign(EpochEntry(epoch, start))

    @property
    def path(self) -> Path:
        return self._path

    @property
    def entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1].epoch if self._entries else UNDEFINED_EPOCH

    @property
    def earliest(self) -> EpochEntry | None:
        return self._entries[0] if self._entries else None

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch whose leader appended ``offset`` (Kafka's epochForOffset): that of the latest entry starting at
        or before it; UNDEFINED_EPOCH when every entry starts after it (or there is none)."""
        index = bisect.bisect_right([entry.start_offset for entry in self._entries], offset)
        return self._entries[index - 1].epoch if index else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Record that ``epoch`` starts at ``start_offset`` (durable on return when it changed anything)."""
        if self._assign(EpochEntry(epoch, start_offset)):
            self._write()

    def end_offset_for(self, epoch: int, log_end_offset: int) -> EpochEndOffset:
        """OffsetForLeaderEpoch: the largest known epoch <= ``epoch`` and the offset where it ended."""
        if epoch == UNDEFINED_EPOCH or not self._entries:
            return EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if epoch == self.latest_epoch:
            return EpochEndOffset(epoch, log_end_offset)
        epochs = [entry.epoch for entry in self._entries]
        higher = bisect.bisect_right(epochs, epoch)
        if higher == len(self._entries):
            return EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)  # newer than any epoch this log has seen
        end = self._entries[higher].start_offset
        if higher == 0:
            return EpochEndOffset(
                epoch, end
            )  # older than every cached epoch: its records are gone; end where ours start
        return EpochEndOffset(self._entries[higher - 1].epoch, end)

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at ``end_offset``: forget epochs that start at or after it."""
        kept = [entry for entry in self._entries if entry.start_offset < end_offset]
        if end_offset >= 0 and len(kept) != len(self._entries):
            self._entries = kept
            self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at ``start_offset``: the epoch in force there starts there; older ones go."""
        before = [entry for entry in self._entries if entry.start_offset <= start_offset]
        if not before or before == [EpochEntry(before[-1].epoch, start_offset)]:
            return
        self._entries = [EpochEntry(before[-1].epoch, start_offset), *self._entries[len(before) :]]
        self._write()

    def clear(self) -> None:
        """Forget every epoch (the log was emptied to start elsewhere: Kafka's clearAndFlush)."""
        if self._entries:
            self._entries = []
            self._write()

    def rebuild(self, entries: Iterable[tuple[int, int]]) -> None:
        """Replace the entries by ``(epoch, start offset)`` pairs read from the log's batches in offset order,
        applying ``assign``'s rules, and write the checkpoint (even when empty, so it need not be rebuilt again)."""
        self._entries = []
        for epoch, start in entries:
            self._assign(EpochEntry(epoch, start))
        self._write()

    def _assign(self, entry: EpochEntry) -> bool:
        if entry.epoch < 0 or entry.start_offset < 0:
            raise ValueError(f"invalid leader epoch entry {entry}")
        latest = self._entries[-1] if self._entries else None
        if latest is not None and entry.epoch == latest.epoch and entry.start_offset >= latest.start_offset:
            return False
        while self._entries and (
            self._entries[-1].epoch >= entry.epoch or self._entries[-1].start_offset >= entry.start_offset
        ):
            self._entries.pop()
        self._entries.append(entry)
        return True

    def _read(self) -> list[tuple[int, int]]:
        try:
            return [(int(epoch), int(start)) for epoch, start in read_checkpoint(self._path, 2)]
        except ValueError as exc:
            raise StorageError(f"{self._path}: malformed leader epoch checkpoint: {exc}") from exc

    def _write(self) -> None:
        atomic_write(self._path, encode_checkpoint([f"{e.epoch} {e.start_offset}" for e in self._entries]))
