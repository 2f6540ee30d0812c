"""One partition's durable log (Kafka's UnifiedLog): what lies above the segment files. Three classes share the work,
as in Kafka's storage module: ``storage.local_log.LocalLog`` (segments, roll, writes, reads, truncation, recovery,
flush), ``storage.log_validator`` (every batch parsed and CRC-checked once, offsets assigned) and ``PartitionLog``
here (high watermark, last stable offset, producer state, leader epochs, retention decisions).

Thread safety: every method runs on one thread (the event loop) except ``flush``, which may run concurrently
in a worker thread (see ``local_log``).

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

from dataclasses import dataclass
from pathlib import Path

from oncelog.protocol.records.batch import BatchHeader
from oncelog.storage.append_origin import AppendOrigin
from oncelog.storage.cleaner import CleanedGroup
from oncelog.storage.compaction_plan import LogTransactions
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import (
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    UnexpectedAppendOffsetError,
)
from oncelog.storage.faults import fault_point
from oncelog.storage.leader_epoch import INITIAL_LEADER_EPOCH, LEADER_EPOCH_CHECKPOINT, LeaderEpochCache
from oncelog.storage.local_log import LocalLog, SyncPlan, parse_log_dir_name
from oncelog.storage.log_validator import DecompressionBudget, validate_and_assign, validate_replicated
from oncelog.storage.producer_state import ProducerAppendInfo, ProducerStateManager, SnapshotCorruptError
from oncelog.storage.segment import LogSegment
from oncelog.storage.txn_index import AbortedTxn
from oncelog.storage.txn_marker import EndTxnMarker, read_end_txn_marker

__all__ = ["AppendOrigin", "AppendResult", "PartitionLog", "SyncPlan", "parse_log_dir_name"]


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


class PartitionLog:
    """The log of one topic partition over its ``LocalLog``. Create with ``PartitionLog.open``."""

    def __init__(self, local: LocalLog) -> None:
        self.local = local
        self.high_watermark = 0
        self.rebuilt_txn_indexes = 0  # .txnindex files rewritten by the last producer-state rebuild (open/truncate)
        self.producer_state = ProducerStateManager(local.directory, local.config.producer_id_expiration_ms)
        self.leader_epoch_cache = LeaderEpochCache(local.directory / LEADER_EPOCH_CHECKPOINT)

    # ------------------------------------------------------------------------------------------ the local log's
    @property
    def directory(self) -> Path:
        return self.local.directory

    @property
    def config(self) -> LogConfig:
        return self.local.config

    @property
    def topic(self) -> str:
        return self.local.topic

    @property
    def partition(self) -> int:
        return self.local.partition

    @property
    def log_start_offset(self) -> int:
        return self.local.log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self.local.log_end_offset

    @property
    def recovery_point(self) -> int:
        return self.local.recovery_point

    @property
    def durable_offset(self) -> int:
        """Offsets below this are on disk (fdatasync'd .log files); >= recovery_point."""
        return self.local.durable_offset

    @property
    def recovered_segments(self) -> int:
        """How many segments the last open scanned for recovery."""
        return self.local.recovered_segments

    @property
    def active_segment(self) -> LogSegment:
        return self.local.active_segment

    @property
    def segments(self) -> list[LogSegment]:
        """Current segments in offset order (a snapshot; do not mutate)."""
        return self.local.segments

    @property
    def size_in_bytes(self) -> int:
        """Bytes in the segments' ``.log`` files, indexes not counted (Kafka's UnifiedLog.size)."""
        return self.local.size_in_bytes

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
        local = LocalLog.open(
            directory,
            config,
            recovery_point=recovery_point,
            log_start_offset=log_start_offset,
            clean_shutdown=clean_shutdown,
        )
        log = cls(local)
        log.high_watermark = local.log_end_offset
        log._rebuild_producer_state(local.log_end_offset if clean_shutdown else local.recovery_point, now_ms)
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
                        for header in self.local.headers()
                        if header.partition_leader_epoch >= 0
                    )
            else:
                cache.truncate_from_end(self.log_end_offset)
            cache.truncate_from_start(self.log_start_offset)
        except OSError as exc:
            raise KafkaStorageError(f"cannot write {cache.path}: {exc}") from exc

    def _rebuild_producer_state(self, snapshot_limit: int, now_ms: int | None) -> None:
        """Load the newest valid snapshot <= ``snapshot_limit`` and replay the batches after it.

        Stale txn indexes are rewritten from the replay; the snapshot is then taken at or below the first
        stale segment so the replay covers each of them whole.
        """
        state = self.producer_state
        segments = self.local.segments
        state.delete_snapshots(above=self.log_end_offset)
        stale = [s for s in segments if s.txn_index_stale]
        if stale:
            snapshot_limit = min(snapshot_limit, stale[0].base_offset)
        rebuilt: dict[int, list[AbortedTxn]] = {s.base_offset: [] for s in stale}
        start = segments[0].base_offset
        state.truncate()
        for offset in reversed(state.snapshot_offsets()):
            if offset > snapshot_limit or offset < segments[0].base_offset:
                continue
            try:
                state.load_snapshot(offset, now_ms)
            except (SnapshotCorruptError, OSError):
                state.snapshot_path(offset).unlink(missing_ok=True)
                continue
            start = offset
            break
        for segment in segments:
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
        self.local.config = config
        self.producer_state.producer_id_expiration_ms = config.producer_id_expiration_ms

    # ------------------------------------------------------------------------------------------ appending
    def append(
        self,
        records: bytes | bytearray | memoryview,
        *,
        now_ms: int,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        budget: DecompressionBudget | None = None,
        leader_epoch: int = INITIAL_LEADER_EPOCH,
    ) -> AppendResult:
        """Append whole v2 batches as the leader of epoch ``leader_epoch``: validate all and assign offsets from the
        log end (``log_validator.validate_and_assign``, within ``budget``, default one of its own), check producer
        state, write.

        CLIENT appends may not hold control batches; only they are checked for sequences and answered from
        the duplicate cache. Raises CorruptRecordError, InvalidRecordError, RecordValidationError,
        RecordTooLargeError, producer-state errors (nothing is appended) or KafkaStorageError (write failed; the
        segment and its indexes are cut back to their previous size).
        """
        assigned = validate_and_assign(
            records,
            self.config,
            origin,
            now_ms,
            self.directory.name,
            next_offset=self.log_end_offset,
            leader_epoch=leader_epoch,
            budget=budget,
        )
        buf = assigned.buf
        log_append_time = self.config.log_append_time
        info = self.producer_state.prepare(origin)
        for pos, header in assigned.headers:
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
        self._write(assigned.pieces(), len(buf), assigned.headers, info, now_ms)
        return AppendResult(
            first_offset,
            assigned.next_offset - 1,
            self.log_start_offset,
            False,
            assigned.max_timestamp,
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
        if self.local.should_roll(size, len(headers), headers[-1][1].last_offset, now_ms):
            self.roll()
        self.local.append(pieces, headers, info.aborted)
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

    def roll(self) -> LogSegment:
        """Start a new active segment at the log end offset and snapshot the producer state there; the old
        segment's index files get their remaining entries first."""
        segment = self.local.roll()
        try:
            fault_point("storage.roll")
            self.producer_state.take_snapshot(self.log_end_offset)
        except OSError as exc:
            raise KafkaStorageError(f"cannot snapshot producer state in {self.directory}: {exc}") from exc
        return segment

    def maybe_roll_for_time(self, now_ms: int) -> None:
        """Roll when the active segment's first batch is older than log.roll.ms (for idle partitions)."""
        if not self.active_segment.is_empty and self.local.roll_time_reached(now_ms):
            self.roll()

    # ------------------------------------------------------------------------------------------ watermarks
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
        """(producer_id, first_offset) of every aborted transaction overlapping [start_offset, upper_bound_offset)
        (see ``LocalLog.collect_aborted_transactions``)."""
        return self.local.collect_aborted_transactions(start_offset, upper_bound_offset)

    def compaction_transactions(self, end: int) -> LogTransactions:
        """What a compaction pass over the offsets below ``end`` must know beyond its batches: the aborted
        transactions starting below ``end`` (from every segment's index: a marker may lie past ``end``), sorted
        by first offset, and each producer's last data batch and epoch."""
        aborted = sorted(
            (txn.first_offset, txn.producer_id, txn.last_offset)
            for segment in self.segments
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
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one_batch: bool = True) -> bytes:
        """Whole batches from the one holding ``offset`` (see ``LocalLog.read``)."""
        return self.local.read(offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch)

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or above the log start offset whose timestamp is >=
        ``timestamp_ms`` (see ``LocalLog.offset_for_timestamp``), or None."""
        return self.local.offset_for_timestamp(timestamp_ms)

    def max_timestamp_offset(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp (see ``LocalLog.max_timestamp_offset``);
        None for an empty log."""
        return self.local.max_timestamp_offset()

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
        self.local.raise_log_start_offset(offset)
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
        return self._delete_oldest(self.local.segments_below_start())

    def _delete_oldest(self, count: int) -> int:
        """Delete the ``count`` oldest segments (their files at once), raising the log start offset to the first
        segment left, with the producer snapshots below it; returns ``count``."""
        if count == 0:
            return 0
        self.local.delete_oldest(count)
        self.producer_state.delete_snapshots(below=self.segments[0].base_offset)
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
        segments = self.segments
        i = self.local.segments_below_start()
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
        """Install a compacted segment in place of the segments it was made from (see
        ``LocalLog.replace_segments``)."""
        self.local.replace_segments(cleaned)

    # ------------------------------------------------------------------------------------------ truncation
    def truncate_to(self, offset: int) -> None:
        """Remove every batch holding offsets >= ``offset`` (cutting at the start of the batch holding it); the
        producer state is rebuilt (newest snapshot at or below the new end, then replay) and the leader epochs
        starting at or after the new end are dropped."""
        if offset >= self.log_end_offset:
            return
        try:
            self.local.truncate_to(offset)
        finally:  # as soon as the segments are cut, even when syncing the directory then fails
            self.high_watermark = min(self.high_watermark, self.log_end_offset)
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
        try:
            self.local.truncate_fully_and_start_at(offset)
        finally:  # as soon as the segments are replaced, even when syncing the directory then fails
            if self.log_start_offset == self.log_end_offset == offset:
                self.high_watermark = offset
        self.producer_state.truncate()
        self.producer_state.delete_snapshots(above=-1)  # every one
        self.producer_state.on_high_watermark(offset)
        try:
            self.leader_epoch_cache.clear()
        except OSError as exc:
            raise KafkaStorageError(f"cannot write {self.leader_epoch_cache.path}: {exc}") from exc

    # ------------------------------------------------------------------------------------------ durability
    def flush(self, up_to: int | None = None) -> None:
        """fsync the files holding data below ``up_to`` and advance the recovery point (``LocalLog.flush``); safe
        from a worker thread."""
        self.local.flush(up_to)

    def flush_data(self, up_to: int | None = None) -> None:
        """fdatasync the ``.log`` files holding data below ``up_to`` and advance ``durable_offset``
        (``LocalLog.flush_data``); safe from a worker thread."""
        self.local.flush_data(up_to)

    def sync_plan(self, up_to: int | None = None, *, data_only: bool) -> SyncPlan | None:
        """What ``flush_data`` (``data_only``) or ``flush`` would sync (``LocalLog.sync_plan``)."""
        return self.local.sync_plan(up_to, data_only=data_only)

    def synced(self, plan: SyncPlan) -> None:
        """Record that ``plan``'s files were synced (``LocalLog.synced``)."""
        self.local.synced(plan)

    def close(self) -> None:
        """Flush, snapshot the producer state at the log end, close every file."""
        self.flush()
        self.producer_state.take_snapshot(self.log_end_offset)
        self.local.close()

    def delete(self) -> None:
        """Close the files and remove the partition directory."""
        self.local.delete()


def _stored_marker(segment: LogSegment, position: int, header: BatchHeader) -> EndTxnMarker | None:
    """The marker of a control batch read back from ``segment`` (None for data batches or unreadable markers,
    which replay ignores as Kafka's replication origin would fail on them only when appending)."""
    if not header.is_control or header.producer_id < 0:
        return None
    try:
        return read_end_txn_marker(segment.pread(header.size, position), 0, header)
    except InvalidRecordError:
        return None
