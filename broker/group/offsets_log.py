"""The ``__consumer_offsets`` topic: where committed offsets and group metadata are made durable, and read back.

A group lives in partition ``abs(hashCode(group.id)) % offsets.topic.num.partitions``. ``append`` returns only once
the records are fsynced, and on a partition led with followers replicated to its ISR (Kafka's acks=all, waiting up
to ``offsets.commit.timeout.ms``), or with an error, mapped as Kafka's GroupMetadataManager maps append errors.
Offsets from TxnOffsetCommit are appended as a transactional batch of the producer and stay pending until that
producer's COMMIT / ABORT marker lands in the same partition. ``load_steps`` replays a partition from its start: the
last record per key wins, tombstones delete (an offset tombstone also drops the partition's pending transactional
offsets, as Kafka's OffsetMetadataManager.replay does), transactional offsets follow their markers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import structlog
from oncelog.broker.clock import now_ms
from oncelog.broker.coordinator_partitions import LOAD_STEP_RECORDS, LoadSteps
from oncelog.broker.internal_log import InternalTopicLog
from oncelog.broker.metadata import CONSUMER_OFFSETS_TOPIC
from oncelog.protocol import DecodeError, ErrorCode
from oncelog.protocol.internal.consumer_group_log import decode_consumer_key
from oncelog.protocol.internal.group_log import (
    GroupKey,
    GroupValue,
    OffsetKey,
    OffsetValue,
    decode_group_value,
    decode_key,
    decode_offset_value,
)
from oncelog.protocol.records import (
    ControlType,
    SimpleRecord,
    decode_control_record,
    encode_batch,
)

if TYPE_CHECKING:
    from oncelog.broker.replica_manager import ReplicaManager
    from oncelog.storage.log_manager import LogManager

log = structlog.get_logger(__name__)

#: Kafka's ``offsets.commit.timeout.ms``: how long an append to ``__consumer_offsets`` waits for the ISR.
OFFSETS_COMMIT_TIMEOUT_MS = 5000


#: Kafka's GroupMetadataManager mapping of append errors to what group clients understand.
_APPEND_ERRORS = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    ErrorCode.INVALID_FETCH_SIZE: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
}


@dataclass
class LoadedGroup:
    """What the log says about one group: its metadata, committed offsets and pending transactional offsets
    (values paired with their record's offset in ``__consumer_offsets``)."""

    metadata: GroupValue | None = None
    offsets: dict[tuple[str, int], tuple[OffsetValue, int]] = field(default_factory=dict)
    pending: dict[int, dict[tuple[str, int], tuple[OffsetValue, int]]] = field(default_factory=dict)
    #: Its KIP-848 records (``consumer_group_log``), last value per key, tombstoned keys gone.
    consumer: dict[bytes, bytes] = field(default_factory=dict)


class GroupLog(InternalTopicLog):
    """Appends group records durably and replays them at start."""

    def __init__(
        self,
        replicas: ReplicaManager,
        logs: LogManager,
        *,
        num_partitions: int,
        ensure_topic: Callable[[], Awaitable[None]],
    ) -> None:
        """``num_partitions``: offsets.topic.num.partitions; ``ensure_topic`` creates ``__consumer_offsets`` on
        first use."""
        super().__init__(
            CONSUMER_OFFSETS_TOPIC,
            num_partitions,
            replicas=replicas,
            logs=logs,
            create_topic=ensure_topic,
            commit_timeout_ms=OFFSETS_COMMIT_TIMEOUT_MS,
            append_errors=_APPEND_ERRORS,
            after_append_fault="group.after_offset_append",
        )

    async def append(
        self,
        group_id: str,
        records: Sequence[tuple[bytes, bytes | None]],
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> tuple[ErrorCode, int]:
        """Append ``records`` (key, value) in one batch -- transactional when ``producer_id`` >= 0 -- and wait until
        it is durable. Returns (error, offset of the first record)."""
        transactional = producer_id >= 0
        batch = encode_batch(
            [SimpleRecord(key, value) for key, value in records],
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=0 if transactional else -1,  # Kafka's group coordinator writes 0
            transactional=transactional,
            now_ms=now_ms(),
        )
        return await self.append_batch(group_id, batch)

    def load_steps(self, partition: int) -> LoadSteps:
        """Replay the partition (yielding every LOAD_STEP_RECORDS records); returns its groups. Undecodable records
        are skipped with a warning."""
        groups: dict[str, LoadedGroup] = {}
        # producer id -> groups with pending offsets of that producer in this partition
        pending_by_producer: dict[int, set[str]] = {}
        for replayed, (header, record) in enumerate(self.replay(partition), 1):
            if replayed % LOAD_STEP_RECORDS == 0:
                yield
            if header.is_control:
                control_type, _ = decode_control_record(record.key, record.value)
                for group_id in pending_by_producer.pop(header.producer_id, ()):
                    loaded = groups[group_id]
                    pending = loaded.pending.pop(header.producer_id, {})
                    if control_type == ControlType.COMMIT:
                        for tp, (value, offset) in pending.items():
                            current = loaded.offsets.get(tp)
                            if current is None or current[1] < offset:
                                loaded.offsets[tp] = (value, offset)
                continue
            if record.key is None:
                continue
            try:
                if (consumer_key := decode_consumer_key(record.key)) is not None:
                    records = groups.setdefault(consumer_key.group, LoadedGroup()).consumer
                    if record.value is None:
                        records.pop(bytes(record.key), None)
                    else:
                        records[bytes(record.key)] = bytes(record.value)
                    continue
                key = decode_key(record.key)
                if isinstance(key, OffsetKey):
                    value = decode_offset_value(record.value)
                    loaded = groups.setdefault(key.group, LoadedGroup())
                    tp = (key.topic, key.partition)
                    if header.is_transactional:
                        if value is not None:
                            loaded.pending.setdefault(header.producer_id, {})[tp] = (value, record.offset)
                            pending_by_producer.setdefault(header.producer_id, set()).add(key.group)
                    elif value is None:
                        loaded.offsets.pop(tp, None)
                        for pending in loaded.pending.values():
                            pending.pop(tp, None)
                    else:
                        loaded.offsets[tp] = (value, record.offset)
                elif isinstance(key, GroupKey):
                    metadata = decode_group_value(record.value)
                    groups.setdefault(key.group, LoadedGroup()).metadata = metadata
            except DecodeError as exc:
                log.warning("group_record_skipped", partition=partition, offset=record.offset, error=str(exc))
        return groups
