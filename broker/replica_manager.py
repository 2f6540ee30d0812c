"""Partitions of this node: append with idempotence checks, durable acknowledgement, reads bounded by the
high watermark or the last stable offset, wake-ups for long-polling fetches, record deletion (log start
offsets raised durably), and each partition's current leader epoch (stamped in every batch appended here and
checked against the epochs clients send)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

import structlog
import trio
from oncelog.broker.flusher import UNWAITED_FLUSH_DELAY_S, LogFlusher, SyncWaiter
from oncelog.protocol import ErrorCode
from oncelog.protocol.messages.delete_records import HIGH_WATERMARK, INVALID_LOW_WATERMARK
from oncelog.storage import errors as storage_errors
from oncelog.storage.append_origin import AppendOrigin
from oncelog.storage.leader_epoch import (
    INITIAL_LEADER_EPOCH,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEndOffset,
)
from oncelog.storage.log import AppendResult, PartitionLog
from oncelog.storage.log_manager import LogManager
from oncelog.storage.log_validator import DecompressionBudget

log = structlog.get_logger(__name__)

#: A request's current_leader_epoch when the client does not know it (Kafka's RecordBatch.NO_PARTITION_LEADER_EPOCH):
#: not checked.
NO_LEADER_EPOCH = -1
#: Kafka's IsolationLevel values.
READ_UNCOMMITTED = 0
READ_COMMITTED = 1

_STORAGE_ERROR_CODES: dict[type[Exception], ErrorCode] = {
    storage_errors.CorruptRecordError: ErrorCode.CORRUPT_MESSAGE,
    storage_errors.InvalidRecordError: ErrorCode.CORRUPT_MESSAGE,
    storage_errors.RecordValidationError: ErrorCode.INVALID_RECORD,
    storage_errors.InvalidTimestampError: ErrorCode.INVALID_TIMESTAMP,
    storage_errors.RecordTooLargeError: ErrorCode.MESSAGE_TOO_LARGE,
    storage_errors.OffsetOutOfRangeError: ErrorCode.OFFSET_OUT_OF_RANGE,
    storage_errors.OutOfOrderSequenceError: ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    storage_errors.InvalidProducerEpochError: ErrorCode.INVALID_PRODUCER_EPOCH,
    storage_errors.UnknownProducerIdError: ErrorCode.UNKNOWN_PRODUCER_ID,
    storage_errors.InvalidTxnStateError: ErrorCode.INVALID_TXN_STATE,
    storage_errors.TransactionCoordinatorFencedError: ErrorCode.TRANSACTION_COORDINATOR_FENCED,
    storage_errors.KafkaStorageError: ErrorCode.KAFKA_STORAGE_ERROR,
}


def error_code_for(exc: Exception) -> ErrorCode:
    """The Kafka error code a storage exception is reported as."""
    for kind in type(exc).__mro__:
        code = _STORAGE_ERROR_CODES.get(kind)  # type: ignore[arg-type]
        if code is not None:
            return code
    return ErrorCode.KAFKA_STORAGE_ERROR


@dataclass
class PartitionAppend:
    """Outcome of appending one partition's records."""

    error: ErrorCode
    result: AppendResult | None = None
    message: str | None = None
    #: ``(index in its batch, message)`` of every record the error is about (Produce v8+ ``record_errors``).
    record_errors: list[tuple[int, str]] = field(default_factory=list)


@dataclass
class PartitionRead:
    """Outcome of reading one partition for a fetch."""

    error: ErrorCode
    records: bytes = b""
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    #: (producer id, first offset) of aborted transactions overlapping the records (read_committed only).
    aborted_transactions: list[tuple[int, int]] = field(default_factory=list)


@dataclass(frozen=True)
class PartitionDeletion:
    """Outcome of deleting one partition's records: its log start offset after it (the low watermark)."""

    error: ErrorCode
    low_watermark: int = INVALID_LOW_WATERMARK


class ReplicaManager:
    """Routes appends and reads to partition logs; the only path by which the broker writes partition data."""

    def __init__(self, logs: LogManager, flusher: LogFlusher) -> None:
        self.logs = logs
        self.flusher = flusher
        self._fetch_watchers: dict[tuple[str, int], set[trio.Event]] = defaultdict(set)
        self._leader_epochs: dict[tuple[str, int], int] = {}

    def get_log(self, topic: str, partition: int) -> PartitionLog | None:
        return self.logs.get(topic, partition)

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The partition's current leader epoch: the one set last, else INITIAL_LEADER_EPOCH (0, the single node's,
        as Kafka's single KRaft node starts there)."""
        return self._leader_epochs.get((topic, partition), INITIAL_LEADER_EPOCH)

    def set_leader_epoch(self, topic: str, partition: int, epoch: int) -> None:
        """Make ``epoch`` the partition's current leader epoch (the controller's LeaderAndIsr / partition change):
        appends stamp it from now on and requests are checked against it (``check_leader_epoch``)."""
        if epoch < 0:
            raise ValueError(f"invalid leader epoch {epoch} for {topic}-{partition}")
        self._leader_epochs[(topic, partition)] = epoch

    def check_leader_epoch(self, topic: str, partition: int, current_leader_epoch: int) -> ErrorCode:
        """Kafka's Partition.checkCurrentLeaderEpoch for a request's ``current_leader_epoch``: -1 is not checked;
        newer than ours is UNKNOWN_LEADER_EPOCH (this broker has not heard of it yet: retriable); older is
        FENCED_LEADER_EPOCH (the client's metadata is stale: it refreshes it)."""
        if current_leader_epoch == NO_LEADER_EPOCH:
            return ErrorCode.NONE
        ours = self.leader_epoch(topic, partition)
        if current_leader_epoch > ours:
            return ErrorCode.UNKNOWN_LEADER_EPOCH
        if current_leader_epoch < ours:
            return ErrorCode.FENCED_LEADER_EPOCH
        return ErrorCode.NONE

    def last_offset_for_leader_epoch(
        self, topic: str, partition: int, current_leader_epoch: int, leader_epoch: int
    ) -> tuple[ErrorCode, EpochEndOffset]:
        """OffsetForLeaderEpoch for one partition (Kafka's Partition.lastOffsetForLeaderEpoch): where
        ``leader_epoch`` ended in this log, from its leader-epoch cache (``LeaderEpochCache.end_offset_for``, the log
        end offset for the latest epoch). NOT_LEADER_OR_FOLLOWER without a log here; the current_leader_epoch
        check's error (``check_leader_epoch``) before any lookup; the answer's epoch and offset are -1 with an error.
        """
        undefined = EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        partition_log = self.logs.get(topic, partition)
        if partition_log is None:
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, undefined
        error = self.check_leader_epoch(topic, partition, current_leader_epoch)
        if error != ErrorCode.NONE:
            return error, undefined
        return ErrorCode.NONE, partition_log.leader_epoch_cache.end_offset_for(
            leader_epoch, partition_log.log_end_offset
        )

    def append(
        self,
        topic: str,
        partition: int,
        records: bytes | bytearray | memoryview,
        now_ms: int,
        *,
        origin: AppendOrigin = AppendOrigin.CLIENT,
        unwaited_delay_s: float = UNWAITED_FLUSH_DELAY_S,
        budget: DecompressionBudget | None = None,
    ) -> PartitionAppend:
        """Validate and append a partition's batches; the data is not yet durable (see ``wait_durable``). If nobody
        waits for it, fsync mode syncs it within ``unwaited_delay_s``.

        Only the coordinator (``AppendOrigin.COORDINATOR``) may append control batches (transaction markers).
        ``budget`` caps the bytes the request's compressed batches inflate to (``storage.log_validator``).
        """
        partition_log = self.logs.get(topic, partition)
        if partition_log is None:
            return PartitionAppend(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        try:
            result = partition_log.append(
                records,
                now_ms=now_ms,
                origin=origin,
                budget=budget,
                leader_epoch=self.leader_epoch(topic, partition),
            )
        except storage_errors.StorageError as exc:
            code = error_code_for(exc)
            log.info("append_rejected", topic=topic, partition=partition, error=code.name, reason=str(exc))
            record_errors = exc.record_errors if isinstance(exc, storage_errors.RecordValidationError) else []
            return PartitionAppend(code, message=str(exc), record_errors=record_errors)
        except OSError as exc:
            log.error("append_failed", topic=topic, partition=partition, error=str(exc))
            return PartitionAppend(ErrorCode.KAFKA_STORAGE_ERROR, message=str(exc))
        if not result.duplicate:
            self.flusher.appended(
                partition_log, result.last_offset - result.first_offset + 1, unwaited_delay_s=unwaited_delay_s
            )
        return PartitionAppend(ErrorCode.NONE, result)

    def request_durable(self, topic: str, partition: int, end_offset: int) -> SyncWaiter | None:
        """Start making the partition's data below ``end_offset`` durable without waiting; ``wait_requested`` gives
        the outcome (see ``LogFlusher.request_sync``). Call it right after the append: None when there is nothing
        to wait for."""
        partition_log = self.logs.get(topic, partition)
        return None if partition_log is None else self.flusher.request_sync(partition_log, end_offset)

    async def wait_requested(self, waiter: SyncWaiter | None) -> ErrorCode:
        """The outcome of a ``request_durable``: NONE once durable, KAFKA_STORAGE_ERROR if an fsync failed."""
        try:
            await self.flusher.wait_for(waiter)
        except storage_errors.KafkaStorageError:
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    async def wait_durable(self, topic: str, partition: int, end_offset: int) -> ErrorCode:
        """Wait until the partition's data below ``end_offset`` is fsynced (immediate in page-cache mode)."""
        partition_log = self.logs.get(topic, partition)
        if partition_log is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        try:
            await self.flusher.wait_durable(partition_log, end_offset)
        except storage_errors.KafkaStorageError:
            return ErrorCode.KAFKA_STORAGE_ERROR
        return ErrorCode.NONE

    @staticmethod
    def last_stable_offset(partition_log: PartitionLog) -> int:
        """The first offset of the oldest transaction not yet decided (or whose marker is not yet visible),
        capped at the high watermark."""
        return partition_log.last_stable_offset

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, isolation_level: int, *, min_one_batch: bool
    ) -> PartitionRead:
        """Read whole batches from ``offset`` up to the high watermark (or LSO under read_committed).

        With ``min_one_batch`` the first batch is returned whole even when larger than ``max_bytes``.
        """
        partition_log = self.logs.get(topic, partition)
        if partition_log is None:
            return PartitionRead(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        high_watermark = partition_log.high_watermark
        last_stable = self.last_stable_offset(partition_log)
        limit = last_stable if isolation_level == READ_COMMITTED else high_watermark
        read = PartitionRead(
            ErrorCode.NONE,
            high_watermark=high_watermark,
            last_stable_offset=last_stable,
            log_start_offset=partition_log.log_start_offset,
        )
        if offset > high_watermark or offset < partition_log.log_start_offset:
            # Beyond the high watermark but within the log is still in range in Kafka only for followers.
            if offset > partition_log.log_end_offset or offset < partition_log.log_start_offset:
                read.error = ErrorCode.OFFSET_OUT_OF_RANGE
            return read
        if offset >= limit:
            return read
        try:
            read.records = partition_log.read(offset, max_bytes, max_offset=limit, min_one_batch=min_one_batch)
            if isolation_level == READ_COMMITTED and read.records:
                read.aborted_transactions = partition_log.collect_aborted_transactions(offset, limit)
        except storage_errors.StorageError as exc:
            read.error = error_code_for(exc)
        except OSError as exc:
            log.error("read_failed", topic=topic, partition=partition, error=str(exc))
            read.error = ErrorCode.KAFKA_STORAGE_ERROR
        return read

    def delete_records(self, offsets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], PartitionDeletion]:
        """Delete the records below each partition's offset (``HIGH_WATERMARK``: below the high watermark) by raising
        its log start offset, as Kafka's ReplicaManager.deleteRecords on the leader. Every raised offset is durable
        (the log-start-offset checkpoint is fsynced) before this returns; the segments wholly below it stay until
        the log's ``delete_segments_below_start`` or its next retention sweep.

        Per partition: UNKNOWN_TOPIC_OR_PARTITION without a log; POLICY_VIOLATION unless its cleanup.policy holds
        "delete"; OFFSET_OUT_OF_RANGE for an offset above the high watermark or negative; KAFKA_STORAGE_ERROR, for
        all of them, when the checkpoint cannot be written (nothing changes then). Otherwise NONE with the log start
        offset, which a lower offset leaves as it was.
        """
        results: dict[tuple[str, int], PartitionDeletion] = {}
        targets: dict[tuple[str, int], int] = {}
        logs: dict[tuple[str, int], PartitionLog] = {}
        for (topic, partition), offset in offsets.items():
            partition_log = self.logs.get(topic, partition)
            if partition_log is None:
                results[(topic, partition)] = PartitionDeletion(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
                continue
            if not partition_log.config.deletes:
                # "Records of partition ... can not be deleted due to the configured policy" (Partition.scala).
                results[(topic, partition)] = PartitionDeletion(ErrorCode.POLICY_VIOLATION)
                continue
            target = partition_log.high_watermark if offset == HIGH_WATERMARK else offset
            try:
                partition_log.check_log_start_offset(target)
            except storage_errors.OffsetOutOfRangeError:
                results[(topic, partition)] = PartitionDeletion(ErrorCode.OFFSET_OUT_OF_RANGE)
                continue
            targets[(topic, partition)] = target
            logs[(topic, partition)] = partition_log
        try:
            self.logs.advance_log_start_offsets(targets)
        except storage_errors.KafkaStorageError as exc:
            log.error("log_start_offsets_not_saved", partitions=len(targets), error=str(exc))
            return results | {tp: PartitionDeletion(ErrorCode.KAFKA_STORAGE_ERROR) for tp in targets}
        for (topic, partition), partition_log in logs.items():
            start = partition_log.log_start_offset
            results[(topic, partition)] = PartitionDeletion(ErrorCode.NONE, start)
            log.info("records_deleted", topic=topic, partition=partition, log_start_offset=start)
        return results

    # Long polling ----------------------------------------------------------------------------------------------

    def watch(self, partitions: list[tuple[str, int]], event: trio.Event) -> None:
        """Set ``event`` when any of ``partitions`` makes new data visible."""
        for tp in partitions:
            self._fetch_watchers[tp].add(event)

    def unwatch(self, partitions: list[tuple[str, int]], event: trio.Event) -> None:
        for tp in partitions:
            watchers = self._fetch_watchers.get(tp)
            if watchers is not None:
                watchers.discard(event)
                if not watchers:
                    del self._fetch_watchers[tp]

    def high_watermark_advanced(self, partition_log: PartitionLog) -> None:
        """Called when a partition's visible data grows: wake the fetches waiting on it."""
        watchers = self._fetch_watchers.pop((partition_log.topic, partition_log.partition), None)
        for event in watchers or ():
            event.set()
