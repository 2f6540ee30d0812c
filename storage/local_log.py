"""The segments of one partition on local disk (Kafka's LocalLog): load and recovery, roll, write, reads, retention
deletes, truncation and flush. What lies above the bytes (high watermark, last stable offset, producer state, leader
epochs, validation) is ``storage.log.PartitionLog``'s.

Thread safety: every method runs on one thread (the event loop) except ``flush`` / ``flush_data`` / ``sync_plan`` /
``synced``, which may run concurrently in a worker thread. Segment-list changes (roll, retention, truncation) and the
choice of files to sync happen under ``lock``; the list is replaced, never mutated in place, so lock-free readers
see a consistent list. ``flush`` syncs duplicated file descriptors outside the lock, so a segment deleted meanwhile
is harmless.

Guarantees:
- ``append`` writes the batches with one ``write`` to the active segment and moves the log end; it never fsyncs and
  never rolls (the caller asks ``should_roll`` first, as Kafka's UnifiedLog.maybeRoll does).
- ``truncate_to(o)`` cuts at the start of the batch holding ``o``; the log end may end up below ``o``.
- ``delete_oldest`` deletes segment files immediately (file.delete.delay.ms is not applied) and raises the log start
  offset to the first segment left.
- ``read`` returns whole batches only, within [log_start_offset, log_end_offset].
"""

from __future__ import annotations

import bisect
import contextlib
import os
import shutil
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from oncelog.protocol.records.batch import BATCH_HEADER_SIZE, BatchHeader, parse_header
from oncelog.storage.checkpoint import fsync_dir
from oncelog.storage.cleaner import CleanedGroup
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import KafkaStorageError, OffsetOutOfRangeError, StorageError
from oncelog.storage.faults import fault_point
from oncelog.storage.recovery import load_segments
from oncelog.storage.segment import MAX_RELATIVE_OFFSET, LogSegment
from oncelog.storage.txn_index import AbortedTxn

__all__ = ["LocalLog", "SyncPlan", "parse_log_dir_name"]


@dataclass(frozen=True, slots=True)
class SyncPlan:
    """Files to sync so that offsets below ``end`` become durable (see ``LocalLog.sync_plan``)."""

    end: int
    #: fdatasync of the ``.log`` files only (else fsync of the segment files and their indexes).
    data_only: bool
    #: The log's truncation count when planned: a truncation meanwhile makes the plan stale.
    truncations: int
    #: Duplicated descriptors, owned by whoever syncs them.
    fds: tuple[int, ...]


def parse_log_dir_name(name: str) -> tuple[str, int]:
    """Split ``<topic>-<partition>`` on the last '-'; raises ValueError when it is not such a name."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"not a partition directory name: {name!r}")
    return topic, int(partition)


class LocalLog:
    """The segment files of one topic partition and the offsets they define. Create with ``LocalLog.open``."""

    def __init__(self, directory: Path, config: LogConfig) -> None:
        self.directory = directory
        self.config = config
        self.topic, self.partition = parse_log_dir_name(directory.name)
        self.lock = threading.Lock()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._truncations = 0
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.recovery_point = 0
        #: Offsets below this are on disk (fdatasync'd .log files); >= recovery_point.
        self.durable_offset = 0
        self.recovered_segments = 0  # how many segments the last open scanned for recovery

    # ------------------------------------------------------------------------------------------ opening
    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = False,
    ) -> LocalLog:
        """Open (creating when missing) the segments in ``directory``, recovering unflushed data after a crash
        (``storage.recovery``); a log wholly below ``log_start_offset`` is emptied and starts there."""
        directory = Path(directory)
        created = not directory.exists()
        directory.mkdir(parents=True, exist_ok=True)
        if created:
            fsync_dir(directory.parent)
        log = cls(directory, config)
        result = load_segments(directory, config, recovery_point=recovery_point, clean_shutdown=clean_shutdown)
        log.recovered_segments = result.recovered_segments
        segments = result.segments
        if segments and segments[-1].next_offset < log_start_offset:
            for segment in segments:
                segment.delete()
            segments = []
        if not segments:
            segments = [log.new_segment(log_start_offset)]
        log._set_segments(segments)
        log.log_end_offset = segments[-1].next_offset
        log.log_start_offset = max(log_start_offset, segments[0].base_offset)
        log.recovery_point = log.log_end_offset if clean_shutdown else min(recovery_point, log.log_end_offset)
        log.durable_offset = log.recovery_point
        return log

    def new_segment(self, base_offset: int, *, sync_dir: bool = True) -> LogSegment:
        """A new empty segment file at ``base_offset`` (not yet in the log)."""
        segment = LogSegment(self.directory, base_offset, self.config)
        segment.rebuild_indexes()
        if sync_dir:
            fsync_dir(self.directory)
        return segment

    def _set_segments(self, segments: list[LogSegment]) -> None:
        self._segments = segments
        self._bases = [s.base_offset for s in segments]

    # ------------------------------------------------------------------------------------------ segments
    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> list[LogSegment]:
        """Current segments in offset order (a snapshot; do not mutate)."""
        return self._segments

    @property
    def size_in_bytes(self) -> int:
        """Bytes in the segments' ``.log`` files, indexes not counted (Kafka's UnifiedLog.size)."""
        return sum(segment.size for segment in self._segments)

    def segment_index(self, offset: int) -> int:
        """Index in ``segments`` of the segment that holds ``offset`` (the first one below every segment)."""
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

    def headers(self) -> Iterable[BatchHeader]:
        """Every batch header of the log, in offset order."""
        return (header for segment in self._segments for _pos, header in segment.iter_headers(0))

    # ------------------------------------------------------------------------------------------ writing
    def should_roll(self, size: int, batches: int, last_offset: int, now_ms: int) -> bool:
        """Whether ``batches`` batches of ``size`` bytes up to ``last_offset`` go to a new segment: the active one is
        not empty and would pass log.segment.bytes, its index capacity or the relative-offset range, or is older
        than log.roll.ms."""
        segment = self.active_segment
        if segment.is_empty:
            return False
        return (
            segment.size + size > self.config.segment_bytes
            or self.roll_time_reached(now_ms)
            or segment.offset_index.entries + batches > segment.offset_index.max_entries
            or segment.time_index.entries + batches > segment.time_index.max_entries
            or last_offset - segment.base_offset > MAX_RELATIVE_OFFSET
        )

    def roll_time_reached(self, now_ms: int) -> bool:
        """Whether the active segment's first batch is older than log.roll.ms."""
        first = self.active_segment.first_batch_timestamp
        return first is not None and now_ms - first > self.config.max_segment_ms

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset; the old segment's index files get their remaining
        entries first. Raises KafkaStorageError."""
        try:
            self.active_segment.write_index_entries()
            segment = self.new_segment(self.log_end_offset)
        except OSError as exc:
            raise KafkaStorageError(f"cannot roll {self.directory}: {exc}") from exc
        with self.lock:
            self._set_segments([*self._segments, segment])
        return segment

    def append(
        self,
        pieces: tuple[bytes | memoryview, ...] | list[bytes | memoryview],
        headers: list[tuple[int, BatchHeader]],
        aborted: list[AbortedTxn],
    ) -> None:
        """Write ``pieces`` (the batches ``headers`` describe, at those positions) and their aborted-transaction
        entries to the active segment, then move the log end. Raises KafkaStorageError (the segment and its indexes
        are cut back to their previous size)."""
        segment = self.active_segment
        try:
            segment.append(pieces, headers, aborted)
        except OSError as exc:
            raise KafkaStorageError(f"append to {segment.log_path} failed: {exc}") from exc
        self.log_end_offset = headers[-1][1].next_offset

    # ------------------------------------------------------------------------------------------ reading
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True) -> bytes:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` and before ``max_offset``.

        The first batch is returned whole even when larger than ``max_bytes`` if ``min_one_batch``.
        Raises OffsetOutOfRangeError outside [log_start_offset, log_end_offset]; the log end gives b"".
        """
        if offset < self.log_start_offset or offset > self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self.log_start_offset}, "
                f"{self.log_end_offset}] of {self.topic}-{self.partition}"
            )
        segments = self._segments
        chunks: list[bytes] = []
        remaining = max_bytes
        first = True
        for segment in segments[self.segment_index(offset) :]:
            if first:
                found = segment.find_batch(offset)
                if found is None:
                    continue
                pos, header = found
            else:
                pos, header = 0, segment.read_header(0)
                if header is None:
                    continue
            if max_offset is not None and header.base_offset >= max_offset:
                break
            if header.size > remaining:
                if first and min_one_batch:
                    chunks.append(segment.pread(header.size, pos))
                break
            available = segment.size - pos
            data = segment.pread(min(remaining, available), pos)
            cut, stopped = _whole_batches(data, max_offset)
            chunks.append(data if cut == len(data) else data[:cut])
            remaining -= cut
            first = False
            if stopped or cut < available:
                break
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of every aborted transaction overlapping [start_offset,
        upper_bound_offset), in marker order, from the txn indexes of the segment holding ``start_offset`` on
        (stopping once an entry's last stable offset reaches the upper bound, as Kafka does)."""
        result: list[tuple[int, int]] = []
        segments = self._segments
        for segment in segments[self.segment_index(start_offset) :]:
            found, complete = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            result.extend((txn.producer_id, txn.first_offset) for txn in found)
            if complete:
                break
        return result

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or above the log start offset whose timestamp is >=
        ``timestamp_ms`` (see ``LogSegment.find_timestamp``), or None."""
        for segment in self._segments:
            if segment.next_offset <= self.log_start_offset or segment.max_timestamp < timestamp_ms:
                continue
            found = segment.find_timestamp(timestamp_ms, self.log_start_offset)
            if found is not None:
                return found
        return None

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp (ListOffsets -3; KIP-734): the record
        of the first batch holding it (Kafka's UnifiedLog.fetchOffsetByTimestamp), raised to the log start offset;
        None for an empty log.
        """
        best: LogSegment | None = None
        for segment in self._segments:
            if segment.is_empty or segment.next_offset <= self.log_start_offset:
                continue
            if best is None or segment.max_timestamp > best.max_timestamp:
                best = segment
        if best is None:
            return None
        found = best.find_batch(best.offset_of_max_timestamp)
        if found is None:
            return None
        position, header = found
        # Kafka's RecordBatch.offsetOfMaxTimestamp: the first record of the batch carrying its max timestamp.
        record = best.first_record(position, header, lambda r: r.timestamp == header.max_timestamp)
        offset = record[0] if record is not None else header.base_offset
        return max(offset, self.log_start_offset), best.max_timestamp

    # ------------------------------------------------------------------------------------------ log start, deletion
    def raise_log_start_offset(self, offset: int) -> None:
        """Set the log start offset to ``offset`` (above the current one), the recovery point and durable offset
        to at least it."""
        with self.lock:
            self.log_start_offset = offset
            self.recovery_point = max(self.recovery_point, offset)
            self.durable_offset = max(self.durable_offset, self.recovery_point)

    def segments_below_start(self) -> int:
        """How many of the oldest segments hold only offsets below the log start offset (not the active one)."""
        segments = self._segments
        count = 0
        while count + 1 < len(segments) and segments[count + 1].base_offset <= self.log_start_offset:
            count += 1
        return count

    def delete_oldest(self, count: int) -> None:
        """Delete the ``count`` oldest segments (their files at once; ``count`` > 0 and below the segment count),
        raising the log start offset to the first segment left."""
        segments = self._segments
        with self.lock:
            self._set_segments(segments[count:])
        for segment in segments[:count]:
            segment.delete()
        with self.lock:
            self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
            self.recovery_point = max(self.recovery_point, self.log_start_offset)
            self.durable_offset = max(self.durable_offset, self.recovery_point)

    def replace_segments(self, cleaned: CleanedGroup) -> None:
        """Install a compacted segment (``storage.cleaner``) in place of the adjacent segments it was made from,
        whose files are already gone; their objects are closed. Raises StorageError, changing nothing, when they are
        no longer the log's (the new segment's files then stay for the next load)."""
        with self.lock:
            segments = self._segments
            old = cleaned.old
            at = next((i for i, s in enumerate(segments) if s is old[0]), -1)
            current = segments[at : at + len(old)] if at >= 0 else []
            if len(current) != len(old) or any(a is not b for a, b in zip(current, old, strict=True)):
                raise StorageError(f"{self.topic}-{self.partition}: compacted segments changed meanwhile")
            self._set_segments([*segments[:at], cleaned.new, *segments[at + len(old) :]])
        for segment in old:
            segment.close()

    # ------------------------------------------------------------------------------------------ truncation
    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding offsets >= ``offset`` (below the log end), cutting at the start of the batch
        holding it; a cut below the log start empties the log, which then starts at ``offset``."""
        with self.lock:  # a concurrent flush must not see the log half-truncated
            self._truncations += 1
            segments = self._segments
            keep = [s for s in segments if s.base_offset < offset]
            if offset < self.log_start_offset:
                keep = []
            for segment in segments[len(keep) :]:
                segment.delete()
            if keep:
                found = keep[-1].find_batch(offset)
                if found is not None:
                    keep[-1].truncate_to_position(found[0])
            else:
                keep = [self.new_segment(max(offset, 0), sync_dir=False)]
                self.log_start_offset = keep[0].base_offset
            self._set_segments(keep)
            self.log_end_offset = self.active_segment.next_offset
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
            self.durable_offset = min(self.durable_offset, self.log_end_offset)
        fsync_dir(self.directory)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start the log empty at ``offset``: log start, log end and recovery point all
        become ``offset``."""
        with self.lock:
            self._truncations += 1
            for segment in self._segments:
                segment.delete()
            self._set_segments([self.new_segment(offset, sync_dir=False)])
            self.log_start_offset = self.log_end_offset = offset
            self.recovery_point = self.durable_offset = offset
        fsync_dir(self.directory)

    # ------------------------------------------------------------------------------------------ durability
    def flush(self, up_to: int | None = None) -> None:
        """fsync every segment and index holding data below ``up_to`` (default: the log end), then advance
        ``recovery_point`` (and ``durable_offset``). Safe to call from a worker thread while the owning thread
        appends and reads. The active segment's index files may lack their newest entries (see ``index_file``):
        recovery rebuilds that segment's indexes from the log, whatever its recovery point.
        """
        self._sync(up_to, data_only=False)

    def flush_data(self, up_to: int | None = None) -> None:
        """fdatasync the ``.log`` files holding data below ``up_to``, then advance ``durable_offset``.

        This is what acknowledging needs: after a crash, recovery revalidates everything above the recovery point
        by CRC and rebuilds the indexes, so the index files need not be synced on the acknowledgement path (``flush``
        syncs them, and only it advances the recovery point). Safe to call from a worker thread.
        """
        self._sync(up_to, data_only=True)

    def sync_plan(self, up_to: int | None = None, *, data_only: bool) -> SyncPlan | None:
        """What ``flush_data`` (``data_only``) or ``flush`` would sync, for a caller that syncs the files itself:
        duplicates of their descriptors, which the caller closes. None if nothing below ``up_to`` needs it."""
        with self.lock:
            synced = self.durable_offset if data_only else self.recovery_point
            end = self.log_end_offset if up_to is None else min(up_to, self.log_end_offset)
            if end <= synced:
                return None
            fds: list[int] = []
            try:
                for segment in self._segments_between(synced, end):
                    files = (
                        (segment.fd,)
                        if data_only
                        else (segment.fd, segment.offset_index.fd, segment.time_index.fd, segment.txn_index.fd)
                    )
                    fds.extend(os.dup(fd) for fd in files)
            except OSError as exc:
                for fd in fds:
                    os.close(fd)
                raise KafkaStorageError(f"flush of {self.directory} failed: {exc}") from exc
            return SyncPlan(end, data_only, self._truncations, tuple(fds))

    def _segments_between(self, start: int, end: int) -> list[LogSegment]:
        """The segments holding offsets in [start, end), oldest first. Walks back from the active segment, so it
        costs what it returns, not the log's segment count (usually only the active segment is unsynced)."""
        found = []
        for segment in reversed(self._segments):
            if segment.next_offset <= start:
                break
            if segment.base_offset < end:
                found.append(segment)
        found.reverse()
        return found

    def synced(self, plan: SyncPlan) -> None:
        """Record that ``plan``'s files were synced: advance ``durable_offset`` (and, for a full flush,
        ``recovery_point``) to its end, unless the log was truncated meanwhile."""
        with self.lock:
            if plan.truncations != self._truncations:
                return
            end = min(plan.end, self.log_end_offset)
            if not plan.data_only:
                self.recovery_point = max(self.recovery_point, end)
            self.durable_offset = max(self.durable_offset, end)

    def _sync(self, up_to: int | None, *, data_only: bool) -> None:
        plan = self.sync_plan(up_to, data_only=data_only)
        if plan is None:
            return
        sync = os.fdatasync if data_only else os.fsync
        try:
            fault_point("storage.fsync")
            for fd in plan.fds:
                sync(fd)
        except OSError as exc:
            raise KafkaStorageError(f"flush of {self.directory} failed: {exc}") from exc
        finally:
            for fd in plan.fds:
                os.close(fd)
        self.synced(plan)

    def close(self) -> None:
        """Close every segment's files (without flushing)."""
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        """Close the files and remove the partition directory."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self.directory)
        with contextlib.suppress(OSError):
            fsync_dir(self.directory.parent)


def _whole_batches(data: bytes, max_offset: int | None) -> tuple[int, bool]:
    """Length of the whole batches at the start of ``data`` (stopping before base offset >= ``max_offset``),
    and whether ``max_offset`` stopped it."""
    pos = 0
    end = len(data)
    while end - pos >= BATCH_HEADER_SIZE:
        header = parse_header(data, pos)
        if max_offset is not None and header.base_offset >= max_offset:
            return pos, True
        if pos + header.size > end:
            break
        pos += header.size
    return pos, False
