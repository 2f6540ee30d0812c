"""One partition's durable log (Kafka's UnifiedLog/LocalLog): append, read, roll, retention, truncate, flush.

Thread safety: every method runs on one thread (the event loop) except ``flush``, which may run concurrently
in a worker thread. Segment-list changes (roll, retention, truncation) and the choice of files to sync happen
under ``_lock``; the list is replaced, never mutated in place, so lock-free readers see a consistent list.
``flush`` syncs duplicated file descriptors outside the lock, so a segment deleted meanwhile is harmless.

Other guarantees:
- ``append`` validates every batch before writing any; one ``write`` per call; never fsyncs.
- Offsets are assigned by rewriting each batch's base offset, and the partition leader epoch by writing the
  appending leader's epoch (``leader_epoch``) in every batch (``partitionLeaderEpoch``), client and coordinator
  batches alike.
- ``append_as_follower`` (Kafka's appendAsFollower) writes batches fetched from the leader as they are: offsets,
  timestamps and leader epochs kept, CRCs checked, producer state updated from them (markers and the
  ``.txnindex`` included) so that this replica dedupes retries and knows the last stable offset once it leads.
  Its first batch may not start below the log end offset (UnexpectedAppendOffsetError); a gap above it is a
  compacted leader's and is kept.
- ``high_watermark`` starts at the log end offset on open (a single-replica broker has nothing to wait for);
  the broker may lower or advance it with ``update_high_watermark``.
- ``truncate_to(o)`` cuts at the start of the batch holding ``o``; the log end may end up below ``o``.
- Retention deletes segment files immediately (file.delete.delay.ms is not applied) and only segments wholly
  below the high watermark, as Kafka does.
- ``advance_log_start_offset`` (DeleteRecords) raises the log start offset up to the high watermark, mid-segment
  too; the segments wholly below it go with ``delete_segments_below_start`` or the next ``enforce_retention``.

Leader epochs (KIP-101): ``leader_epoch_cache`` (``storage.leader_epoch``, file ``leader-epoch-checkpoint``) holds
where each epoch's batches start. Appends of either kind add an epoch the first time a batch of a newer epoch than
the latest known is appended (the checkpoint is written before the batch); ``truncate_to`` drops the epochs
starting at or after the new log end; a raised log start offset moves the epoch in force there to start there.
Opening a log without the file rebuilds it from the batches' ``partitionLeaderEpoch`` (once: the file is then
written, even empty); opening a log with it drops the entries at or beyond the recovered log end (written before
data that a crash then lost).

Transactions (Kafka's UnifiedLog):
- ``append(..., origin=CLIENT)`` refuses control batches (InvalidRecordError); COORDINATOR appends may hold
  transaction markers, whose effect on producer state is described in ``producer_state``. An ABORT marker
  closing an open transaction adds an entry to the ``.txnindex`` of the segment that receives it.
- ``last_stable_offset`` = min(first unstable offset, high watermark), the first unstable offset raised to the
  log start offset; completed transactions hold it until ``update_high_watermark`` passes their marker.
- ``collect_aborted_transactions`` scans the txn indexes from the segment holding the start offset on.
- Opening rebuilds every stale ``.txnindex`` (recovered segments; missing or corrupt files) by replaying
  producer state from the newest snapshot at or below the first stale segment's base offset.
"""

from __future__ import annotations

import bisect
import contextlib
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path

from oncelog.protocol.records.batch import (
    BATCH_HEADER_SIZE,
    MAGIC_POS,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    parse_header,
    set_log_append_time,
    set_max_timestamp,
    unchecked_prefix,
)
from oncelog.storage.append_origin import AppendOrigin
from oncelog.storage.checkpoint import fsync_dir
from oncelog.storage.cleaner import CleanedGroup
from oncelog.storage.compaction_plan import LogTransactions
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import (
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    StorageError,
    UnexpectedAppendOffsetError,
)
from oncelog.storage.faults import fault_point
from oncelog.storage.leader_epoch import INITIAL_LEADER_EPOCH, LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from oncelog.storage.log_validator import (
    DecompressionBudget,
    ValidatedBatch,
    rebuild_batch,
    validate_append,
    validate_replicated,
)
from oncelog.storage.producer_state import ProducerAppendInfo, ProducerStateManager, SnapshotCorruptError
from oncelog.storage.recovery import load_segments
from oncelog.storage.segment import MAX_RELATIVE_OFFSET, LogSegment
from oncelog.storage.txn_index import AbortedTxn
from oncelog.storage.txn_marker import EndTxnMarker, read_end_txn_marker

__all__ = ["AppendOrigin", "AppendResult", "PartitionLog", "parse_log_dir_name"]


@dataclass(frozen=True, slots=True)
class SyncPlan:
    """Files to sync so that offsets below ``end`` become durable (see ``PartitionLog.sync_plan``)."""

    end: int
    #: fdatasync of the ``.log`` files only (else fsync of the segment files and their indexes).
    data_only: bool
    #: The log's truncation count when planned: a truncation meanwhile makes the plan stale.
    truncations: int
    #: Duplicated descriptors, owned by whoever syncs them.
    fds: tuple[int, ...]


@dataclass
class AppendResult:
    """Offsets given to an append; for a retried idempotent batch (``duplicate``) the original ones."""

    first_offset: int
    last_offset: int
    log_start_offset: int
    duplicate: bool
    max_timestamp: int
    #: The timestamp the broker gave the batches (message.timestamp.type=LogAppendTime), else -1.
    log_append_time: int = -1


def parse_log_dir_name(name: str) -> tuple[str, int]:
    """Split ``<topic>-<partition>`` on the last '-'; raises ValueError when it is not such a name."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit():
        raise ValueError(f"not a partition directory name: {name!r}")
    return topic, int(partition)


class PartitionLog:
    """The segmented log of one topic partition. Create with ``PartitionLog.open``."""

    def __init__(self, directory: Path, config: LogConfig) -> None:
        self.directory = directory
        self.config = config
        self.topic, self.partition = parse_log_dir_name(directory.name)
        self._lock = threading.Lock()
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._truncations = 0
        self.log_start_offset = 0
        self.log_end_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0
        #: Offsets below this are on disk (fdatasync'd .log files); >= recovery_point.
        self.durable_offset = 0
        self.recovered_segments = 0  # how many segments the last open scanned for recovery
        self.rebuilt_txn_indexes = 0  # .txnindex files rewritten by the last producer-state rebuild (open/truncate)
        self.producer_state = ProducerStateManager(directory, config.producer_id_expiration_ms)
        self.leader_epoch_cache = LeaderEpochCache(directory / LEADER_EPOCH_CHECKPOINT)

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
        now_ms: int | None = None,
    ) -> PartitionLog:
        """Open (creating when missing) the log in ``directory``, recovering unflushed data after a crash."""
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
            segments = [log._new_segment(log_start_offset)]
        log._set_segments(segments)
        log.log_end_offset = segments[-1].next_offset
        log.log_start_offset = max(log_start_offset, segments[0].base_offset)
        log.high_watermark = log.log_end_offset
        log.recovery_point = log.log_end_offset if clean_shutdown else min(recovery_point, log.log_end_offset)
        log.durable_offset = log.recovery_point
        log._rebuild_producer_state(log.log_end_offset if clean_shutdown else log.recovery_point, now_ms)
        log.producer_state.on_high_watermark(log.high_watermark)
        log._load_leader_epochs()
        return log

    def _load_leader_epochs(self) -> None:
        """Rebuild the leader-epoch checkpoint from the batches when it is missing; else drop what lies beyond
        the recovered log (see the module docstring)."""
        cache = self.leader_epoch_cache
        try:
            if not cache.path.exists():
                if self.log_end_offset > self.log_start_offset:
                    cache.rebuild(
                        (header.partition_leader_epoch, header.base_offset)
                        for segment in self._segments
                        for _pos, header in segment.iter_headers(0)
                        if header.partition_leader_epoch >= 0
                    )
            else:
                cache.truncate_from_end(self.log_end_offset)
            cache.truncate_from_start(self.log_start_offset)
        except OSError as exc:
            raise KafkaStorageError(f"cannot write {cache.path}: {exc}") from exc

    def _new_segment(self, base_offset: int, *, sync_dir: bool = True) -> LogSegment:
        segment = LogSegment(self.directory, base_offset, self.config)
        segment.rebuild_indexes()
        if sync_dir:
            fsync_dir(self.directory)
        return segment

    def _set_segments(self, segments: list[LogSegment]) -> None:
        self._segments = segments
        self._bases = [s.base_offset for s in segments]

    def _rebuild_producer_state(self, snapshot_limit: int, now_ms: int | None) -> None:
        """Load the newest valid snapshot <= ``snapshot_limit`` and replay the batches after it.

        Stale txn indexes are rewritten from the replay; the snapshot is then taken at or below the first
        stale segment so the replay covers each of them whole.
        """
        state = self.producer_state
        state.delete_snapshots(above=self.log_end_offset)
        stale = [s for s in self._segments if s.txn_index_stale]
        if stale:
            snapshot_limit = min(snapshot_limit, stale[0].base_offset)
        rebuilt: dict[int, list[AbortedTxn]] = {s.base_offset: [] for s in stale}
        start = self._segments[0].base_offset
        state.truncate()
        for offset in reversed(state.snapshot_offsets()):
            if offset > snapshot_limit or offset < self._segments[0].base_offset:
                continue
            try:
                state.load_snapshot(offset, now_ms)
            except (SnapshotCorruptError, OSError):
                state.snapshot_path(offset).unlink(missing_ok=True)
                continue
            start = offset
            break
        for segment in self._segments:
            if segment.next_offset <= start:
                continue
            found = segment.find_batch(start) if segment.base_offset < start else (0, None)
            if found is None:
                continue
            entries = rebuilt.get(segment.base_offset)
            for pos, header in segment.iter_headers(found[0]):
                if header.base_offset >= start:
                    aborted = state.replay(header, _stored_marker(segment, pos, header))
                    if aborted is not None and entries is not None:
                        entries.append(aborted)
        for segment in stale:
            try:
                segment.txn_index.replace(rebuilt[segment.base_offset])
            except OSError as exc:
                raise KafkaStorageError(f"cannot rebuild {segment.txn_index.path}: {exc}") from exc
            segment.txn_index_stale = False
        self.rebuilt_txn_indexes = len(stale)
        if now_ms is not None:
            state.expire_producers(now_ms)

    # ------------------------------------------------------------------------------------------ configuration
    def update_config(self, config: LogConfig) -> None:
        """Use ``config`` from now on (Kafka's UnifiedLog.updateConfig), without reopening anything.

        What the log decides per call follows at once: the largest batch accepted, rolling by size or age (at the
        next append or ``maybe_roll_for_time``), retention, whether client batches need keys, producer expiry, and
        what a compaction pass started afterwards uses. What shapes a segment's files (index.interval.bytes,
        segment.index.bytes) applies from the next new segment: existing segments keep theirs, as in Kafka. The
        flush settings are for whoever fsyncs the log (the broker's ``LogFlusher.update_config`` calls this).
        """
        self.config = config
        self.producer_state.producer_id_expiration_ms = config.producer_id_expiration_ms

    # ------------------------------------------------------------------------------------------ appending
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

    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        budget: DecompressionBudget | None = None,
        leader_epoch: int = INITIAL_LEADER_EPOCH,
    ) -> AppendResult:
        """Append whole v2 batches as the leader of epoch ``leader_epoch``: validate all (``log_validator``, within
        ``budget``, default one of its own), check producer state, assign offsets, stamp ``leader_epoch`` in each
        batch, write.

        CLIENT appends may not hold control batches; only they are checked for sequences and answered from
        the duplicate cache. Raises CorruptRecordError, InvalidRecordError, RecordValidationError,
        RecordTooLargeError, producer-state errors (nothing is appended) or KafkaStorageError (write failed; the
        segment and its indexes are cut back to their previous size).
        """
        buf: bytes | bytearray | memoryview = records
        batches = validate_append(buf, self.config, origin, now_ms, self.directory.name, budget)
        codec = self.config.compression_codec
        if any(_needs_rebuild(batch, codec) for batch in batches):
            buf, validated = _rebuilt(buf, batches, codec, self.config.max_message_bytes)
        else:
            validated = [(batch.position, batch.header) for batch in batches]
            if any(batch.max_timestamp_fixed for batch in batches):
                buf = bytearray(buf)  # a lying maxTimestamp is set from the records, in place
                for batch in batches:
                    if batch.max_timestamp_fixed:
                        set_max_timestamp(buf, batch.position, batch.header.size, batch.header.max_timestamp)
        log_append_time = self.config.log_append_time
        if log_append_time and not isinstance(buf, bytearray):
            buf = bytearray(buf)  # stamped in place
        next_offset = self.log_end_offset
        headers = []
        max_timestamp = -1
        for pos, header in validated:
            header = header._replace(base_offset=next_offset, partition_leader_epoch=leader_epoch)
            if log_append_time:
                set_log_append_time(buf, pos, header.size, now_ms)
                header = header._replace(attributes=header.attributes | TIMESTAMP_TYPE_MASK, max_timestamp=now_ms)
            headers.append((pos, header))
            next_offset = header.next_offset
            max_timestamp = max(max_timestamp, header.max_timestamp)
        info = self.producer_state.prepare(origin)
        for pos, header in headers:
            marker: EndTxnMarker | None = None
            if header.is_control:
                if header.compression:
                    raise InvalidRecordError("control batches must not be compressed")
                if header.producer_id >= 0:
                    marker = read_end_txn_marker(buf, pos, header)
            if header.producer_id >= 0:
                if origin is AppendOrigin.CLIENT:
                    duplicate = self.producer_state.find_duplicate(header)
                    if duplicate is not None:
                        return AppendResult(
                            duplicate.first_offset,
                            duplicate.last_offset,
                            self.log_start_offset,
                            True,
                            duplicate.timestamp,
                            duplicate.timestamp if log_append_time else -1,
                        )
                info.append(header, marker)
        first_offset = self.log_end_offset
        self._write(_with_assigned_offsets(buf, headers), len(buf), headers, info, now_ms)
        return AppendResult(
            first_offset,
            next_offset - 1,
            self.log_start_offset,
            False,
            max_timestamp,
            now_ms if log_append_time else -1,
        )

    def append_as_follower(self, records: bytes | bytearray | memoryview, *, now_ms: int) -> AppendResult:
        """Append batches fetched from the partition's leader as they are (Kafka's UnifiedLog.appendAsFollower):
        offsets, timestamps and partition leader epochs kept, each batch's CRC checked, a partial batch at the end
        left out, no size limit (the leader accepted them). Producer state is updated from the batches (data and
        transaction markers, ``.txnindex`` included) without sequence or epoch checks; new leader epochs are
        recorded in ``leader_epoch_cache`` before the batches are written. Rolls segments as ``append`` does;
        does not move the high watermark (the leader tells it).

        Raises UnexpectedAppendOffsetError when the first batch starts below the log end offset or offsets do not
        increase, CorruptRecordError / InvalidRecordError for damaged batches or markers, InvalidTxnStateError
        (nothing is appended), or KafkaStorageError (write failed; the segment is cut back). Nothing to append
        (no whole batch) gives an empty result at the log end.
        """
        headers = validate_replicated(records, self.directory.name)
        if not headers:
            return AppendResult(self.log_end_offset, self.log_end_offset - 1, self.log_start_offset, False, -1)
        first = headers[0][1]
        if first.base_offset < self.log_end_offset:
            raise UnexpectedAppendOffsetError(
                f"Unexpected offset in append to {self.topic}-{self.partition}. First offset {first.base_offset} "
                f"is less than the next offset {self.log_end_offset}"
            )
        info = self.producer_state.prepare(AppendOrigin.REPLICATION)
        for pos, header in headers:
            if header.producer_id >= 0:
                marker = None
                if header.is_control and header.records_count > 0:
                    marker = read_end_txn_marker(records, pos, header)
                info.append(header, marker)
        last_pos, last = headers[-1]
        size = last_pos + last.size
        self._write((memoryview(records)[:size],), size, headers, info, now_ms)
        return AppendResult(
            first.base_offset,
            last.last_offset,
            self.log_start_offset,
            False,
            max(header.max_timestamp for _pos, header in headers),
        )

    def _write(
        self,
        pieces: tuple[bytes | memoryview, ...] | list[bytes | memoryview],
        size: int,
        headers: list[tuple[int, BatchHeader]],
        info: ProducerAppendInfo,
        now_ms: int,
    ) -> None:
        """Record the batches' new leader epochs, roll when due, write ``pieces`` (the ``size`` bytes of the batches
        ``headers`` describe, at those positions) and their aborted-transaction entries, then move the log end and
        commit ``info``."""
        for _pos, header in headers:
            self._assign_epoch(header.partition_leader_epoch, header.base_offset)
        last = headers[-1][1]
        segment = self._maybe_roll(size, len(headers), last.last_offset, now_ms)
        try:
            segment.append(pieces, headers, info.aborted)
        except OSError as exc:
            raise KafkaStorageError(f"append to {segment.log_path} failed: {exc}") from exc
        self.log_end_offset = last.next_offset
        self.producer_state.commit(info)

    def maybe_assign_epoch_start(self, leader_epoch: int) -> None:
        """Record that ``leader_epoch`` starts at the log end offset when it is newer than every epoch the log knows
        (Kafka's maybeAssignEpochStartOffset, when a replica becomes the leader), so that appends at that epoch write
        nothing. Costs an fsync when it records something: a broker taking the lead of many partitions does it in
        worker threads. Raises KafkaStorageError."""
        self._assign_epoch(leader_epoch, self.log_end_offset)

    def _assign_epoch(self, epoch: int, start_offset: int) -> None:
        """Add ``epoch`` starting at ``start_offset`` to the leader-epoch cache when newer than its latest."""
        cache = self.leader_epoch_cache
        if epoch > cache.latest_epoch:
            try:
                cache.assign(epoch, start_offset)
            except OSError as exc:
                raise KafkaStorageError(f"cannot write {cache.path}: {exc}") from exc

    def _should_roll(self, segment: LogSegment, size: int, batches: int, last_offset: int, now_ms: int) -> bool:
        if segment.is_empty:
            return False
        return (
            segment.size + size > self.config.segment_bytes
            or self._roll_time_reached(segment, now_ms)
            or segment.offset_index.entries + batches > segment.offset_index.max_entries
            or segment.time_index.entries + batches > segment.time_index.max_entries
            or last_offset - segment.base_offset > MAX_RELATIVE_OFFSET
        )

    def _roll_time_reached(self, segment: LogSegment, now_ms: int) -> bool:
        first = segment.first_batch_timestamp
        return first is not None and now_ms - first > self.config.max_segment_ms

    def _maybe_roll(self, size: int, batches: int, last_offset: int, now_ms: int) -> LogSegment:
        segment = self.active_segment
        if self._should_roll(segment, size, batches, last_offset, now_ms):
            return self.roll()
        return segment

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset and snapshot the producer state there; the old
        segment's index files get their remaining entries first."""
        try:
            self.active_segment.write_index_entries()
            segment = self._new_segment(self.log_end_offset)
        except OSError as exc:
            raise KafkaStorageError(f"cannot roll {self.directory}: {exc}") from exc
        with self._lock:
            self._set_segments([*self._segments, segment])
        try:
            fault_point("storage.roll")
            self.producer_state.take_snapshot(self.log_end_offset)
        except OSError as exc:
            raise KafkaStorageError(f"cannot snapshot producer state in {self.directory}: {exc}") from exc
        return segment

    def maybe_roll_for_time(self, now_ms: int) -> None:
        """Roll when the active segment's first batch is older than log.roll.ms (for idle partitions)."""
        if not self.active_segment.is_empty and self._roll_time_reached(self.active_segment, now_ms):
            self.roll()

    def update_high_watermark(self, offset: int) -> None:
        """Set the high watermark, clamped to [log_start_offset, log_end_offset]; completed transactions whose
        marker is now below it stop holding the last stable offset."""
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)
        self.producer_state.on_high_watermark(self.high_watermark)

    @property
    def last_stable_offset(self) -> int:
        """First offset a read_committed consumer may not see yet: the oldest open (or completed but not yet
        visible) transaction's first offset, at least the log start offset, at most the high watermark."""
        first_unstable = self.producer_state.first_unstable_offset()
        if first_unstable is None:
            return self.high_watermark
        return min(max(first_unstable, self.log_start_offset), self.high_watermark)

    def collect_aborted_transactions(self, start_offset: int, upper_bound_offset: int) -> list[tuple[int, int]]:
        """(producer_id, first_offset) of every aborted transaction overlapping [start_offset,
        upper_bound_offset), in marker order, from the txn indexes of the segment holding ``start_offset`` on
        (stopping once an entry's last stable offset reaches the upper bound, as Kafka does)."""
        result: list[tuple[int, int]] = []
        segments = self._segments
        for segment in segments[self._segment_index(start_offset) :]:
            found, complete = segment.collect_aborted_txns(start_offset, upper_bound_offset)
            result.extend((txn.producer_id, txn.first_offset) for txn in found)
            if complete:
                break
        return result

    def compaction_transactions(self, end: int) -> LogTransactions:
        """What a compaction pass over the offsets below ``end`` must know beyond its batches: the aborted
        transactions starting below ``end`` (from every segment's index: a marker may lie past ``end``), sorted
        by first offset, and each producer's last data batch and epoch."""
        aborted = sorted(
            (txn.first_offset, txn.producer_id, txn.last_offset)
            for segment in self._segments
            for txn in segment.txn_index.entries
            if txn.first_offset < end and txn.last_offset >= self.log_start_offset
        )
        last_batches = {
            producer_id: (entry.batches[-1].last_offset if entry.batches else None, entry.epoch)
            for producer_id, entry in self.producer_state.producers.items()
        }
        return LogTransactions([(pid, first, last) for first, pid, last in aborted], last_batches)

    def expire_producers(self, now_ms: int) -> int:
        """Drop idle producers (producer.id.expiration.ms); returns how many."""
        return self.producer_state.expire_producers(now_ms)

    # ------------------------------------------------------------------------------------------ reading
    def _segment_index(self, offset: int) -> int:
        return max(bisect.bisect_right(self._bases, offset) - 1, 0)

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
        for segment in segments[self._segment_index(offset) :]:
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

    # ------------------------------------------------------------------------------------------ log start offset
    def check_log_start_offset(self, offset: int) -> None:
        """Raise OffsetOutOfRangeError unless ``offset`` is within [0, high watermark], the offsets the log start
        may be raised to (Kafka's Partition.deleteRecordsOnLeader and UnifiedLog.maybeIncrementLogStartOffset)."""
        if not 0 <= offset <= self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot raise the log start offset of {self.topic}-{self.partition} to {offset}: "
                f"it is outside [0, {self.high_watermark}] (the high watermark)"
            )

    def advance_log_start_offset(self, offset: int) -> bool:
        """Raise the log start offset to ``offset`` in memory (Kafka's maybeIncrementLogStartOffset); returns whether
        it moved (an offset at or below the current one changes nothing). Raises OffsetOutOfRangeError as
        ``check_log_start_offset``. Persisting the offset first is the caller's (``LogManager``).

        From then on reads below it fail, and the high watermark and last stable offset are at least it. Completed
        transactions whose marker is below it stop holding the last stable offset; open ones keep their state, as
        does every producer (Kafka keeps producer state until producer.id.expiration.ms, KIP-360), so a producer
        whose batches are all below the new start goes on with its epoch and sequence. The segments stay until
        ``delete_segments_below_start`` or the next ``enforce_retention``.
        """
        self.check_log_start_offset(offset)
        if offset <= self.log_start_offset:
            return False
        with self._lock:
            self.log_start_offset = offset
            self.recovery_point = max(self.recovery_point, offset)
            self.durable_offset = max(self.durable_offset, self.recovery_point)
        self.producer_state.on_high_watermark(offset)
        self._epochs_from_start()
        return True

    def _epochs_from_start(self) -> None:
        try:
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        except OSError as exc:
            raise KafkaStorageError(f"cannot write {self.leader_epoch_cache.path}: {exc}") from exc

    def delete_segments_below_start(self) -> int:
        """Delete the segments wholly below the log start offset, never the active one (Kafka's
        deleteLogStartOffsetBreachedSegments); returns how many."""
        return self._delete_oldest(self._segments_below_start())

    def _segments_below_start(self) -> int:
        """How many of the oldest segments hold only offsets below the log start offset (not the active one)."""
        segments = self._segments
        count = 0
        while count + 1 < len(segments) and segments[count + 1].base_offset <= self.log_start_offset:
            count += 1
        return count

    def _delete_oldest(self, count: int) -> int:
        """Delete the ``count`` oldest segments (their files at once), raising the log start offset to the first
        segment left, with the producer snapshots below it; returns ``count``."""
        if count == 0:
            return 0
        segments = self._segments
        with self._lock:
            self._set_segments(segments[count:])
        for segment in segments[:count]:
            segment.delete()
        with self._lock:
            self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
            self.recovery_point = max(self.recovery_point, self.log_start_offset)
            self.durable_offset = max(self.durable_offset, self.recovery_point)
        self.producer_state.delete_snapshots(below=self._segments[0].base_offset)
        self.producer_state.on_high_watermark(self.log_start_offset)
        self._epochs_from_start()
        return count

    # ------------------------------------------------------------------------------------------ retention
    def enforce_retention(self, now_ms: int) -> int:
        """Delete the segments wholly below the log start offset whatever the cleanup policy (as Kafka's
        deleteOldSegments), then, when cleanup.policy holds "delete", old segments by log.retention.ms then
        log.retention.bytes; returns how many were deleted.

        Never deletes the active segment nor a segment holding offsets at or above the high watermark.
        """
        segments = self._segments
        i = self._segments_below_start()
        if not self.config.deletes:
            return self._delete_oldest(i)
        candidates = segments[:-1]
        upper_bounds = [s.base_offset for s in segments[1:]]
        if self.config.retention_ms >= 0:
            while (
                i < len(candidates)
                and upper_bounds[i] <= self.high_watermark
                and now_ms - candidates[i].largest_timestamp() > self.config.retention_ms
            ):
                i += 1
        if self.config.retention_bytes >= 0:
            excess = sum(s.size for s in segments[i:]) - self.config.retention_bytes
            while i < len(candidates) and upper_bounds[i] <= self.high_watermark and excess - candidates[i].size >= 0:
                excess -= candidates[i].size
                i += 1
        return self._delete_oldest(i)

    # ------------------------------------------------------------------------------------------ compaction
    def replace_segments(self, cleaned: CleanedGroup) -> None:
        """Install a compacted segment (``storage.cleaner``) in place of the adjacent segments it was made from,
        whose files are already gone; their objects are closed. Raises StorageError, changing nothing, when they are
        no longer the log's (the new segment's files then stay for the next load)."""
        with self._lock:
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
        """Remove every batch holding offsets >= ``offset`` (cutting at the start of the batch holding it); the
        producer state is rebuilt (newest snapshot at or below the new end, then replay) and the leader epochs
        starting at or after the new end are dropped."""
        if offset >= self.log_end_offset:
            return
        with self._lock:  # a concurrent flush must not see the log half-truncated
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
                keep = [self._new_segment(max(offset, 0), sync_dir=False)]
                self.log_start_offset = keep[0].base_offset
            self._set_segments(keep)
            self.log_end_offset = self.active_segment.next_offset
            self.high_watermark = min(self.high_watermark, self.log_end_offset)
            self.recovery_point = min(self.recovery_point, self.log_end_offset)
            self.durable_offset = min(self.durable_offset, self.log_end_offset)
        fsync_dir(self.directory)
        self._rebuild_producer_state(self.log_end_offset, None)
        self.producer_state.on_high_watermark(self.high_watermark)
        try:
            self.leader_epoch_cache.truncate_from_end(self.log_end_offset)
            self.leader_epoch_cache.truncate_from_start(self.log_start_offset)
        except OSError as exc:
            raise KafkaStorageError(f"cannot write {self.leader_epoch_cache.path}: {exc}") from exc

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and start it at ``offset`` (Kafka's truncateFullyAndStartAt): a follower whose log end is
        below its leader's log start fetches from there. Every segment, producer snapshot and leader epoch goes; the
        log start, log end, high watermark and recovery point all become ``offset``. The new start is durable through
        the new segment's base offset (``open`` takes the log start from the first segment)."""
        with self._lock:
            self._truncations += 1
            for segment in self._segments:
                segment.delete()
            self._set_segments([self._new_segment(offset, sync_dir=False)])
            self.log_start_offset = self.log_end_offset = self.high_watermark = offset
            self.recovery_point = self.durable_offset = offset
        fsync_dir(self.directory)
        self.producer_state.truncate()
        self.producer_state.delete_snapshots(above=-1)  # every one
        self.producer_state.on_high_watermark(offset)
        try:
            self.leader_epoch_cache.clear()
        except OSError as exc:
            raise KafkaStorageError(f"cannot write {self.leader_epoch_cache.path}: {exc}") from exc

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
        with self._lock:
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
        with self._lock:
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
        """Flush, snapshot the producer state at the log end, close every file."""
        self.flush()
        self.producer_state.take_snapshot(self.log_end_offset)
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        """Close the files and remove the partition directory."""
        for segment in self._segments:
            segment.close()
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(self.directory)
        with contextlib.suppress(OSError):
            fsync_dir(self.directory.parent)


def _with_assigned_offsets(
    buf: bytes | bytearray | memoryview, headers: list[tuple[int, BatchHeader]]
) -> list[bytes | memoryview]:
    """The batches of ``buf`` as pieces to write, none of them copied: each batch's unchecked prefix rebuilt from
    its header (the offsets and leader epoch this log gave it), then the rest of the batch as it came."""
    view = memoryview(buf)
    pieces: list[bytes | memoryview] = []
    for pos, header in headers:
        pieces.append(unchecked_prefix(header))
        pieces.append(view[pos + MAGIC_POS : pos + header.size])
    return pieces


def _needs_rebuild(batch: ValidatedBatch, codec: int | None) -> bool:
    """Whether a data batch needs new inner offsets or is not in ``codec`` (compression.type; None: any)."""
    header = batch.header
    return not header.is_control and (batch.rebuild or (codec is not None and header.compression != codec))


def _rebuilt(
    buf: bytes | bytearray | memoryview, batches: list[ValidatedBatch], codec: int | None, max_message_bytes: int
) -> tuple[bytearray, list[tuple[int, BatchHeader]]]:
    """The batches with each one ``_needs_rebuild`` names rebuilt by ``log_validator.rebuild_batch``, in ``codec``
    (None: its own)."""
    out = bytearray()
    headers = []
    for batch in batches:
        header = batch.header
        data: bytes | memoryview = memoryview(buf)[batch.position : batch.position + header.size]
        if _needs_rebuild(batch, codec):
            target = header.compression if codec is None else codec
            data = rebuild_batch(buf, batch, target, max_message_bytes)
        headers.append((len(out), parse_header(data)))
        out += data
    return out, headers


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


def _stored_marker(segment: LogSegment, position: int, header: BatchHeader) -> EndTxnMarker | None:
    """The marker of a control batch read back from ``segment`` (None for data batches or unreadable markers,
    which replay ignores as Kafka's replication origin would fail on them only when appending)."""
    if not header.is_control or header.producer_id < 0:
        return None
    try:
        return read_end_txn_marker(segment.pread(header.size, position), 0, header)
    except InvalidRecordError:
        return None
