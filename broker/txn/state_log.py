"""The ``__transaction_state`` topic: where every transaction state change is made durable, and read back at start.

Each change is one record (key: transactional id, value: the metadata; a null value is a tombstone) appended to the
partition ``abs(hashCode(transactional.id)) % transaction.state.log.num.partitions`` and fsynced before the
coordinator acts on it; on a partition led with followers, once the ISR has it too (Kafka's acks=all append), so a
broker that takes the partition over finds every change the old coordinator acted on. Loading replays a partition
from its start: the last record per key wins (the compacted-topic rule), so the result does not depend on compaction
having run.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from oncelog.broker.clock import now_ms
from oncelog.broker.coordinator_partitions import LOAD_STEP_RECORDS, LoadSteps
from oncelog.broker.internal_log import InternalTopicLog
from oncelog.broker.metadata import INTERNAL_TOPIC_CONFIGS, TRANSACTION_STATE_TOPIC
from oncelog.broker.txn.metadata import NO_PRODUCER_ID, TransactionMetadata
from oncelog.protocol import ErrorCode
from oncelog.protocol.internal.transaction_log import (
    TxnLogValue,
    decode_txn_log_key,
    decode_txn_log_value,
    encode_txn_log_key,
    encode_txn_log_value,
)
from oncelog.protocol.records import SimpleRecord, encode_batch

if TYPE_CHECKING:
    from oncelog.broker.replica_manager import ReplicaManager
    from oncelog.broker.topics import TopicManager
    from oncelog.storage.log_manager import LogManager

#: How long a record nobody waits for (a transaction's Complete* record) may stay unsynced in fsync mode; losing it
#: in a crash is harmless (the restart completes the transaction again). The id's next state change usually comes
#: sooner and its fsync covers it, where the flusher's 5 ms for client data would give it an fsync of its own.
UNWAITED_RECORD_SYNC_DELAY_S = 1.0
#: How long a state change waits for the ISR (Kafka's coordinator uses ``request.timeout.ms``, 30000).
REQUEST_TIMEOUT_MS = 30000

#: Kafka's TransactionStateManager mapping of append errors to what transactional clients understand (anything
#: else: COORDINATOR_NOT_AVAILABLE).
_APPEND_ERRORS = {
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
    ErrorCode.MESSAGE_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
    ErrorCode.RECORD_LIST_TOO_LARGE: ErrorCode.UNKNOWN_SERVER_ERROR,
}


class StateLogError(Exception):
    """A state change could not be made durable; the coordinator answers with ``error``."""

    def __init__(self, error: ErrorCode) -> None:
        super().__init__(error.name)
        self.error = error


def to_log_value(metadata: TransactionMetadata) -> TxnLogValue:
    partitions: dict[str, list[int]] = {}
    for topic, partition in sorted(metadata.partitions):
        partitions.setdefault(topic, []).append(partition)
    return TxnLogValue(
        producer_id=metadata.producer_id,
        producer_epoch=metadata.producer_epoch,
        transaction_timeout_ms=metadata.timeout_ms,
        state=metadata.state,
        partitions=partitions,
        last_update_timestamp_ms=metadata.last_update_timestamp_ms,
        start_timestamp_ms=metadata.start_timestamp_ms,
        previous_producer_id=metadata.last_producer_id,
        next_producer_id=metadata.next_producer_id,
        client_transaction_version=metadata.client_transaction_version,
    )


def log_value_version(metadata: TransactionMetadata) -> int:
    """Value v1 (flexible, with KIP-890's tagged fields) once the id uses epoch bumps on EndTxn, else v0 as Kafka
    writes it before ``transaction.version`` 2: the v1 fields are what finishing a prepared TV_2 transaction after a
    restart needs."""
    return 1 if metadata.bumps_epoch_on_end or metadata.next_producer_id != NO_PRODUCER_ID else 0


def from_log_value(transactional_id: str, value: TxnLogValue) -> TransactionMetadata:
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=value.producer_id,
        producer_epoch=value.producer_epoch,
        timeout_ms=value.transaction_timeout_ms,
        state=value.state,
        partitions=frozenset((t, p) for t, ps in value.partitions.items() for p in ps),
        start_timestamp_ms=value.start_timestamp_ms,
        last_update_timestamp_ms=value.last_update_timestamp_ms,
        last_producer_id=value.previous_producer_id,
        client_transaction_version=value.client_transaction_version,
        next_producer_id=value.next_producer_id,
    )


class TransactionStateLog(InternalTopicLog):
    """Appends state changes durably and replays them at start."""

    def __init__(
        self, replicas: ReplicaManager, logs: LogManager, topics: TopicManager, *, num_partitions: int
    ) -> None:
        """``topics`` creates ``__transaction_state`` on first use; ``num_partitions``:
        transaction.state.log.num.partitions."""
        super().__init__(
            TRANSACTION_STATE_TOPIC,
            num_partitions,
            replicas=replicas,
            logs=logs,
            create_topic=partial(
                topics.ensure_internal,
                TRANSACTION_STATE_TOPIC,
                num_partitions,
                INTERNAL_TOPIC_CONFIGS[TRANSACTION_STATE_TOPIC],
            ),
            commit_timeout_ms=REQUEST_TIMEOUT_MS,
            append_errors=_APPEND_ERRORS,
            other_errors=ErrorCode.COORDINATOR_NOT_AVAILABLE,
            unwaited_delay_s=UNWAITED_RECORD_SYNC_DELAY_S,
        )

    async def write(self, metadata: TransactionMetadata | None, transactional_id: str, *, wait: bool = True) -> None:
        """Append the new state (None: a tombstone); with ``wait``, return once it is durable (and replicated to
        the ISR on a partition led with followers).

        Raises StateLogError when the append fails.
        """
        value = (
            encode_txn_log_value(to_log_value(metadata), version=log_value_version(metadata))
            if metadata is not None
            else None
        )
        batch = encode_batch([SimpleRecord(encode_txn_log_key(transactional_id), value)], now_ms=now_ms())
        error, _ = await self.append_batch(transactional_id, batch, wait=wait)
        if error != ErrorCode.NONE:
            raise StateLogError(error)

    def load_steps(self, partition: int) -> LoadSteps:
        """Replay the partition from its start (yielding every LOAD_STEP_RECORDS records): the last record per
        transactional id wins; tombstones delete. Returns the ids' states."""
        states: dict[str, TransactionMetadata] = {}
        replayed = 0
        for _, record in self.replay(partition):
            if record.key is None:
                continue
            transactional_id = decode_txn_log_key(record.key)
            decoded = decode_txn_log_value(record.value)
            if decoded is None:
                states.pop(transactional_id, None)
            else:
                states[transactional_id] = from_log_value(transactional_id, decoded)
            replayed += 1
            if replayed % LOAD_STEP_RECORDS == 0:
                yield
        return states
