"""The producer's transaction manager: producer id/epoch, sequences, the transaction state machine, and the
coordinator requests (InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, TxnOffsetCommit, EndTxn).

Guarantees: state changes follow ``TRANSITIONS`` only (anything else raises IllegalStateError); every broker error
goes through :func:`oncelog.client.errors.classify`: retriable ones are retried with backoff until max.block.ms,
abortable ones move to ABORTABLE_ERROR (only abort_transaction is then allowed), fatal ones to FATAL_ERROR (only
close). Partitions are registered with AddPartitionsToTxn before the first batch to them is sent.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio
from oncelog.client.cluster import COORDINATOR_GROUP, COORDINATOR_TRANSACTION, Cluster
from oncelog.client.errors import (
    EPOCH_BUMP_CODES,
    AbortableTransactionError,
    ConfigError,
    ErrorClass,
    FatalProducerError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    UnsupportedVersionError,
    classify,
    error_for,
)
from oncelog.client.types import GroupMetadata, OffsetAndMetadata, TopicPartition
from oncelog.protocol import ApiKey, ErrorCode

# Backoff for CONCURRENT_TRANSACTIONS while the previous transaction completes (Kafka's client uses 20 ms).
CONCURRENT_TXN_BACKOFF_MS = 20
_COORDINATOR_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})
_SEQUENCE_WRAP = 2**31


async def coordinator_request(
    cluster: Cluster,
    key: ApiKey,
    body: Mapping[str, Any],
    codes: Callable[[Any], list[int]],
    *,
    key_type: int,
    coordinator_key: str,
    max_block_ms: int,
    retry_backoff_ms: int,
) -> Any:
    """Send ``body`` to the coordinator of ``coordinator_key``, retrying coordinator moves, load-in-progress,
    CONCURRENT_TRANSACTIONS and connection errors until ``max_block_ms``; returns the response (whose other errors,
    among ``codes(response)``, the caller handles). Raises KafkaTimeoutError when the time is up."""
    deadline = time.monotonic() + max_block_ms / 1000
    while True:
        backoff = retry_backoff_ms
        try:
            node = await cluster.coordinator(key_type, coordinator_key)
            resp = await cluster.request(node, key, body)
        except (KafkaConnectionError, KafkaTimeoutError):
            cluster.forget_coordinator(key_type, coordinator_key)
            resp = None
        if resp is not None:
            errs = {ErrorCode(c) for c in codes(resp)} - {ErrorCode.NONE}
            if errs & _COORDINATOR_MOVED:
                cluster.forget_coordinator(key_type, coordinator_key)
            elif ErrorCode.CONCURRENT_TRANSACTIONS in errs:
                backoff = CONCURRENT_TXN_BACKOFF_MS
            elif ErrorCode.COORDINATOR_LOAD_IN_PROGRESS not in errs:
                return resp
        if time.monotonic() > deadline:
            raise KafkaTimeoutError(f"{key.name} did not complete within max.block.ms={max_block_ms}")
        await anyio.sleep(backoff / 1000)


class TxnState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TxnState
# The members the per-record checks compare with, as plain names: on Python 3.11 reading a member through its enum
# class costs about 0.1 us, and a send makes several such checks.
_FATAL_ERROR = TxnState.FATAL_ERROR
_ABORTABLE_ERROR = TxnState.ABORTABLE_ERROR
_IN_TRANSACTION = TxnState.IN_TRANSACTION
# target state -> states it may be entered from (Kafka's TransactionManager.State.isTransitionValid).
TRANSITIONS: dict[TxnState, frozenset[TxnState]] = {
    S.UNINITIALIZED: frozenset(),
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION, S.READY}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR, S.ABORTING_TRANSACTION}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR}),
    S.FATAL_ERROR: frozenset(TxnState),
}


class TransactionManager:
    """Producer identity and transaction state of one producer (idempotent-only when transactional_id is None)."""

    def __init__(
        self,
        cluster: Cluster,
        transactional_id: str | None,
        *,
        transaction_timeout_ms: int,
        retry_backoff_ms: int = 100,
        max_block_ms: int = 60000,
    ) -> None:
        self.cluster = cluster
        self.transactional_id = transactional_id
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.max_block_ms = max_block_ms
        self.state = TxnState.UNINITIALIZED
        self.producer_id = -1
        self.producer_epoch = -1
        self.last_error: KafkaError | None = None
        self.new_partitions: set[TopicPartition] = set()
        self.pending_partitions: set[TopicPartition] = set()
        self.partitions: set[TopicPartition] = set()
        self.offsets_added = False
        self.need_epoch_bump = False
        self._sequences: dict[TopicPartition, int] = {}

    @property
    def transactional(self) -> bool:
        return self.transactional_id is not None

    # --- state ------------------------------------------------------------------------------------------

    def transition(self, target: TxnState) -> None:
        if self.state not in TRANSITIONS[target]:
            raise IllegalStateError(f"invalid transaction transition {self.state.name} -> {target.name}")
        self.state = target

    def fail(self, error: KafkaError, *, fatal: bool | None = None) -> KafkaError:
        """Record ``error``: FATAL_ERROR when fatal (default: by its code), else ABORTABLE_ERROR if in a
        transaction. Returns the exception the caller should raise."""
        if fatal is None:
            fatal = error.code is not None and classify(error.code) is ErrorClass.FATAL
        if error.code in EPOCH_BUMP_CODES:
            self.need_epoch_bump = True
        self.last_error = error
        if fatal:
            self.state = TxnState.FATAL_ERROR
            return error if isinstance(error, ProducerFencedError) else FatalProducerError(str(error), error.code)
        if self.transactional and self.state in TRANSITIONS[TxnState.ABORTABLE_ERROR]:
            self.state = TxnState.ABORTABLE_ERROR
            return AbortableTransactionError(str(error), error.code)
        return error

    def _require_transactional(self, method: str) -> None:
        if not self.transactional:
            raise ConfigError(f"{method} requires transactional.id to be set")

    def check_not_failed(self) -> None:
        state = self.state
        if state is _FATAL_ERROR:
            raise FatalProducerError(
                f"the producer hit a fatal error: {self.last_error}", self.last_error.code if self.last_error else None
            )
        if state is _ABORTABLE_ERROR:
            raise AbortableTransactionError(
                f"the transaction must be aborted: {self.last_error}", self.last_error.code if self.last_error else None
            )

    def check_can_send(self) -> None:
        """Raise unless a record may be sent now."""
        self.check_not_failed()
        if self.transactional_id is not None and self.state is not _IN_TRANSACTION:
            raise IllegalStateError(
                f"cannot send outside a transaction (state {self.state.name}); call begin_transaction first"
            )

    def maybe_add_partition(self, tp: TopicPartition) -> None:
        if self.transactional_id is not None and tp not in self.partitions and tp not in self.pending_partitions:
            self.new_partitions.add(tp)

    def is_sendable(self, tp: TopicPartition) -> bool:
        """True when batches for ``tp`` may go out now."""
        if not self.transactional:
            return self.producer_id >= 0
        return self.state in (TxnState.IN_TRANSACTION, TxnState.COMMITTING_TRANSACTION) and tp in self.partitions

    def next_sequence(self, tp: TopicPartition, count: int) -> int:
        base = self._sequences.get(tp, 0)
        self._sequences[tp] = (base + count) % _SEQUENCE_WRAP
        return base

    # --- coordinator plumbing -----------------------------------------------------------------------------

    async def _call(
        self,
        key: ApiKey,
        body: Mapping[str, Any],
        codes: Callable[[Any], list[int]],
        *,
        key_type: int = COORDINATOR_TRANSACTION,
        coordinator_key: str | None = None,
    ) -> Any:
        """``coordinator_request`` with this producer's transactional id, max.block.ms and retry.backoff.ms."""
        ckey = coordinator_key if coordinator_key is not None else self.transactional_id
        assert ckey is not None
        return await coordinator_request(
            self.cluster,
            key,
            body,
            codes,
            key_type=key_type,
            coordinator_key=ckey,
            max_block_ms=self.max_block_ms,
            retry_backoff_ms=self.retry_backoff_ms,
        )

    # --- operations ---------------------------------------------------------------------------------------

    async def init_producer_id(self) -> None:
        """Get a producer id and epoch (InitProducerId); for a transactional producer this fences older ones."""
        if self.state is not TxnState.UNINITIALIZED:
            raise IllegalStateError(f"init_transactions called in state {self.state.name}")
        self.transition(TxnState.INITIALIZING)
        await self._init_producer_id(bump=False)

    async def _init_producer_id(self, *, bump: bool) -> None:
        body = {
            "transactional_id": self.transactional_id,
            "transaction_timeout_ms": self.transaction_timeout_ms,
            "producer_id": self.producer_id if bump else -1,
            "producer_epoch": self.producer_epoch if bump else -1,
        }
        try:
            if self.transactional:
                resp = await self._call(ApiKey.INIT_PRODUCER_ID, body, lambda r: [r.error_code])
            else:
                resp = await self._init_idempotent(body)
        except KafkaError as exc:
            raise self.fail(exc, fatal=True) from None
        if resp.error_code:
            raise self.fail(error_for(resp.error_code, "InitProducerId"), fatal=True)
        self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
        self._sequences.clear()
        self.need_epoch_bump = False
        self.transition(TxnState.READY)

    async def _init_idempotent(self, body: Mapping[str, Any]) -> Any:
        deadline = time.monotonic() + self.max_block_ms / 1000
        while True:
            try:
                resp = await self.cluster.request(None, ApiKey.INIT_PRODUCER_ID, body)
                if not resp.error_code or not ErrorCode(resp.error_code).retriable:
                    return resp
            except KafkaConnectionError:
                pass
            if time.monotonic() > deadline:
                raise KafkaTimeoutError("InitProducerId did not complete within max.block.ms")
            await anyio.sleep(self.retry_backoff_ms / 1000)

    def begin(self) -> None:
        self._require_transactional("begin_transaction")
        self.check_not_failed()
        if self.state is not TxnState.READY:
            raise IllegalStateError(f"begin_transaction called in state {self.state.name}")
        self.transition(TxnState.IN_TRANSACTION)
        self.partitions.clear()
        self.pending_partitions.clear()
        self.new_partitions.clear()
        self.offsets_added = False

    async def add_partitions(self) -> None:
        """Register ``new_partitions`` with the coordinator (one AddPartitionsToTxn round)."""
        if not self.new_partitions or self.state is not TxnState.IN_TRANSACTION:
            return
        pending = set(self.new_partitions)
        self.new_partitions.clear()
        self.pending_partitions |= pending
        topics: dict[str, list[int]] = {}
        for tp in sorted(pending):
            topics.setdefault(tp.topic, []).append(tp.partition)
        body = {
            "v3_and_below_transactional_id": self.transactional_id,
            "v3_and_below_producer_id": self.producer_id,
            "v3_and_below_producer_epoch": self.producer_epoch,
            "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

        def codes(resp: Any) -> list[int]:
            return [p.partition_error_code for t in resp.results_by_topic_v3_and_below for p in t.results_by_partition]

        try:
            resp = await self._call(ApiKey.ADD_PARTITIONS_TO_TXN, body, codes)
        except KafkaError as exc:
            self.pending_partitions -= pending
            self.fail(exc)
            return
        self.pending_partitions -= pending
        retry: set[TopicPartition] = set()
        for t in resp.results_by_topic_v3_and_below:
            for p in t.results_by_partition:
                tp = TopicPartition(t.name, p.partition_index)
                code = p.partition_error_code
                if code == ErrorCode.NONE:
                    self.partitions.add(tp)
                elif code == ErrorCode.OPERATION_NOT_ATTEMPTED or classify(code) is ErrorClass.RETRIABLE:
                    retry.add(tp)
                else:
                    self.fail(error_for(code, f"AddPartitionsToTxn {tp.topic}-{tp.partition}"))
        if self.state is TxnState.IN_TRANSACTION:
            self.new_partitions |= retry
            if retry:
                await anyio.sleep(self.retry_backoff_ms / 1000)

    async def send_offsets(
        self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata], group: GroupMetadata | str
    ) -> None:
        """AddOffsetsToTxn, then TxnOffsetCommit to the group coordinator."""
        self._require_transactional("send_offsets_to_transaction")
        self.check_not_failed()
        if self.state is not TxnState.IN_TRANSACTION:
            raise IllegalStateError(f"send_offsets_to_transaction called in state {self.state.name}")
        if isinstance(group, str):
            group = GroupMetadata(group)
        if not (await self.cluster.versions()).get(ApiKey.TXN_OFFSET_COMMIT, -1) >= 0:
            raise self.fail(UnsupportedVersionError("the broker does not support TxnOffsetCommit"))
        body = {
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "group_id": group.group_id,
        }
        try:
            resp = await self._call(ApiKey.ADD_OFFSETS_TO_TXN, body, lambda r: [r.error_code])
        except KafkaError as exc:
            raise self.fail(exc) from None
        if resp.error_code:
            raise self.fail(error_for(resp.error_code, "AddOffsetsToTxn"))
        self.offsets_added = True
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, value in offsets.items():
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
            topics.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": om.offset,
                    "committed_leader_epoch": om.leader_epoch,
                    "committed_metadata": om.metadata or "",
                }
            )
        commit = {
            "transactional_id": self.transactional_id,
            "group_id": group.group_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "generation_id": group.generation_id,
            "member_id": group.member_id,
            "group_instance_id": group.group_instance_id,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }

        def codes(r: Any) -> list[int]:
            return [p.error_code for t in r.topics for p in t.partitions]

        try:
            resp = await self._call(
                ApiKey.TXN_OFFSET_COMMIT, commit, codes, key_type=COORDINATOR_GROUP, coordinator_key=group.group_id
            )
        except KafkaError as exc:
            raise self.fail(exc) from None
        for code in codes(resp):
            if code:
                raise self.fail(error_for(code, "TxnOffsetCommit"))

    async def end(self, commit: bool) -> None:
        """EndTxn (only when something was added), then READY; KIP-360 epoch bump after an abort if needed.

        Against a broker with EndTxn v5 every transaction ends with a new epoch, so a delayed copy of this EndTxn
        can never end the next transaction (KAFKA-17754)."""
        started = bool(self.partitions) or self.offsets_added
        if started:
            body = {
                "transactional_id": self.transactional_id,
                "producer_id": self.producer_id,
                "producer_epoch": self.producer_epoch,
                "committed": commit,
            }
            try:
                resp = await self._call(ApiKey.END_TXN, body, lambda r: [r.error_code])
            except KafkaError as exc:
                raise self.fail(exc) from None
            if resp.error_code:
                raise self.fail(error_for(resp.error_code, "EndTxn"))
            if resp.producer_id >= 0:
                # EndTxn v5 (KIP-890 part 2): the transaction ended with a bumped epoch (or a new producer id);
                # the next one uses it, so the epoch bump an abort may need has already happened.
                self.producer_id, self.producer_epoch = resp.producer_id, resp.producer_epoch
                self._sequences.clear()
                self.need_epoch_bump = False
        self.partitions.clear()
        self.pending_partitions.clear()
        self.new_partitions.clear()
        self.offsets_added = False
        if not commit and self.need_epoch_bump:
            version = (await self.cluster.versions()).get(ApiKey.INIT_PRODUCER_ID, -1)
            if version < 3:
                raise self.fail(
                    UnsupportedVersionError("the broker cannot bump the producer epoch (InitProducerId v3+)"),
                    fatal=True,
                )
            self.transition(TxnState.INITIALIZING)
            await self._init_producer_id(bump=True)
            return
        self.transition(TxnState.READY)
