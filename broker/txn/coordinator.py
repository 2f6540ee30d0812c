"""The transaction coordinator: Kafka's TransactionCoordinator and the loading part of its TransactionStateManager.

Guarantees:
- Requests for one transactional id are serialized (one lock per id, ``KeyedLocks``: it exists only while held or
  awaited); different ids proceed concurrently. A request naming an id this coordinator does not have is answered
  without keeping anything for it (INVALID_PRODUCER_ID_MAPPING, as Kafka).
- Every state change is appended to ``__transaction_state`` and fsynced before it is acted on or answered.
- EndTxn answers once the markers are durable in every partition of the transaction, or once they have been
  pending for ``transaction.marker.wait.ms`` (oncelog's own setting, default 5000; a partition's leader is away):
  the outcome is decided and durable with PrepareCommit/PrepareAbort, which is when Kafka always answers (its
  TransactionMarkerChannelManager writes the markers afterwards, as the setting's 0 does here). The markers'
  delivery goes on in the background (the marker writer re-routes each partition to its current leader; the others'
  markers are written meanwhile) and the transaction stays prepared until every partition has its marker. The
  Complete* record is appended then (its fsync is not waited for: if it is lost, the restart completes the
  transaction again, and writing a marker twice is harmless).
- Until then the transaction's producer is answered CONCURRENT_TRANSACTIONS, whatever it asks, as in Kafka.
- It coordinates the ids of the ``__transaction_state`` partitions this broker leads, and only those (the single node
  leads every partition and loads them all before serving). When it becomes a partition's leader (a
  ``ReplicaManager`` role listener) it loads that partition's ids from the local replica in bounded steps, answering
  COORDINATOR_LOAD_IN_PROGRESS for them meanwhile, then completes every PrepareCommit/PrepareAbort by writing its
  markers again; ongoing transactions keep their timers. When it stops leading the partition, the ids are dropped at
  once and answered NOT_COORDINATOR; a request still under way fails with NOT_COORDINATOR instead of changing them.
- The coordinator epoch is the leader epoch of the id's partition when it was loaded here; every marker carries it,
  so a partition leader refuses the markers of a deposed coordinator (TRANSACTION_COORDINATOR_FENCED), which then
  stops. State changes are appended at the epoch they were decided under, or not at all.
- An ongoing transaction older than its timeout is aborted with a bumped epoch, which fences the producer, at the
  first check (every ``transaction.abort.timed.out.transaction.cleanup.interval.ms``) after its timeout; an id idle
  for ``transactional.id.expiration.ms`` is forgotten at the first check after that. Both deadlines live in
  ``DeadlineHeap``s kept by ``_persist``, so a check costs O(1 + transactions due), not O(transactional ids).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

import structlog
import trio
from oncelog.broker.coordinator_partitions import CoordinatorPartitions
from oncelog.broker.deadlines import DeadlineHeap
from oncelog.broker.faults import fault_point
from oncelog.broker.keyed_locks import KeyedLocks
from oncelog.broker.metadata import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from oncelog.broker.txn.markers import MARKER_FENCED, MARKER_SETTLED, MarkerWriter, TxnMarker
from oncelog.broker.txn.metadata import (
    COMPLETED_STATES,
    EXHAUSTED_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    PREPARED_STATES,
    TV_0,
    TV_2,
    TransactionMetadata,
    TxnState,
    epoch_exhausted,
)
from oncelog.broker.txn.state_log import StateLogError, TransactionStateLog
from oncelog.protocol import ErrorCode
from oncelog.protocol.internal.java_hash import partition_for_key

if TYPE_CHECKING:
    from oncelog.broker.cluster.producer_ids import ClusterProducerIds
    from oncelog.broker.config import BrokerConfig
    from oncelog.broker.producer_ids import ProducerIdAllocator
    from oncelog.broker.replica_manager import ReplicaManager
    from oncelog.broker.topics import TopicManager
    from oncelog.storage.log_manager import LogManager

log = structlog.get_logger(__name__)

#: Pause between rounds of completing a newly loaded partition's prepared transactions whose markers could not all
#: be written yet (a partition leader is being elected).
COMPLETION_RETRY_BACKOFF_S = 0.5
#: Retries of a marker write that failed with a retriable error, and the pause between them.
MARKER_RETRIES = 10
MARKER_RETRY_BACKOFF_S = 0.1
#: The longest pause between retries of a marker write that keeps failing in the background.
MARKER_RETRY_MAX_BACKOFF_S = 1.0


@dataclasses.dataclass(eq=False)
class _MarkerDelivery:
    """The background delivery of one prepared transaction's markers."""

    marker: TxnMarker
    #: Set when the delivery stops: every partition has its marker (``written``), or it was fenced, deposed, or
    #: ran out of attempts.
    stopped: trio.Event = dataclasses.field(default_factory=trio.Event)
    written: bool = False
    fenced: bool = False
    scope: trio.CancelScope = dataclasses.field(default_factory=trio.CancelScope)


class TransactionCoordinator:
    """Owns the metadata of every transactional id and the transaction state machine."""

    def __init__(
        self,
        config: BrokerConfig,
        replicas: ReplicaManager,
        logs: LogManager,
        topics: TopicManager,
        producer_ids: ProducerIdAllocator | ClusterProducerIds,
        markers: MarkerWriter,
        *,
        clock_ms: Callable[[], int],
    ) -> None:
        """``config``: the broker's settings read here (none of them dynamic); ``topics`` creates
        ``__transaction_state`` on first use; ``producer_ids`` hands out new producer ids; ``markers`` writes the
        transaction markers; ``clock_ms``: wall-clock milliseconds (timeouts, expiration, state timestamps)."""
        self._config = config
        self._producer_ids = producer_ids
        self._markers = markers
        self._clock_ms = clock_ms
        self.state_log = TransactionStateLog(
            replicas, logs, topics, num_partitions=config.get_int("transaction.state.log.num.partitions")
        )
        self._max_timeout_ms = config.get_int("transaction.max.timeout.ms")
        self._marker_wait_s = max(config.get_int("transaction.marker.wait.ms"), 0) / 1000
        self._expiration_ms = config.get_int("transactional.id.expiration.ms")
        self._transactions: dict[str, TransactionMetadata] = {}
        self._locks: KeyedLocks[str] = KeyedLocks()
        #: Ongoing transactions by the first clock reading at which they are past their timeout.
        self._timeouts: DeadlineHeap[str] = DeadlineHeap()
        #: Completed (or empty) ids by the first clock reading at which they have been idle too long.
        self._expirations: DeadlineHeap[str] = DeadlineHeap()
        #: Ids in PrepareCommit / PrepareAbort: their markers are (re)written by ``complete_pending``.
        self._prepared: set[str] = set()
        #: Prepared ids whose markers are being delivered in the background (``_deliver``).
        self._deliveries: dict[str, _MarkerDelivery] = {}
        #: Where deliveries run (``run_loader``'s); None before it runs, when markers are written inline.
        self._nursery: trio.Nursery | None = None
        #: The ``__transaction_state`` partitions whose ids this broker coordinates, at which coordinator epoch.
        self.partitions = CoordinatorPartitions(
            TRANSACTION_STATE_TOPIC,
            replicas,
            load=self.state_log.load_steps,
            install=self._install,
            unload=self._unload,
            after_load=self._complete_partition,
        )

    # Lifecycle -------------------------------------------------------------------------------------------------

    def load(self) -> None:
        """Read the ``__transaction_state`` partitions this broker leads without an applied state (blocking; called
        before serving): every partition on the single node, none on a cluster member, which loads each partition
        when it comes to lead it (``run_loader``)."""
        self.partitions.load_unassigned(self.state_log.num_partitions)
        pending = len(self._prepared)
        log.info("transactions_loaded", transactional_ids=len(self._transactions), to_complete=pending)

    def _install(self, partition: int, epoch: int, loaded: dict[str, TransactionMetadata]) -> None:
        for metadata in loaded.values():
            self._transactions[metadata.transactional_id] = metadata
            self._track(metadata)

    def _unload(self, partition: int) -> None:
        for transactional_id in [t for t in self._deliveries if self.state_log.partition_for(t) == partition]:
            self._deliveries.pop(transactional_id).scope.cancel()
        for transactional_id in [t for t in self._transactions if self.state_log.partition_for(t) == partition]:
            del self._transactions[transactional_id]
            self._untrack(transactional_id)

    async def run_loader(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Load each ``__transaction_state`` partition this broker comes to lead, then complete its prepared
        transactions in the background; deliveries of markers run here too."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                await self.partitions.run(task_status=task_status)
            finally:
                self._nursery = None

    async def _complete_partition(self, partition: int, epoch: int) -> None:
        """Complete the partition's prepared transactions, round after round, while it is owned at ``epoch``."""
        while self.partitions.owned.get(partition) == epoch:
            prepared = [t for t in self._prepared if self.state_log.partition_for(t) == partition]
            if not prepared:
                return
            await self._complete_prepared(prepared)
            await trio.sleep(COMPLETION_RETRY_BACKOFF_S)

    async def complete_pending(self) -> None:
        """Finish transactions left between PrepareCommit/PrepareAbort and Complete* (by a crash, or by marker
        writes that kept failing)."""
        await self._complete_prepared(list(self._prepared))

    async def _complete_prepared(self, transactional_ids: list[str]) -> None:
        for transactional_id in sorted(transactional_ids):
            async with self._locks(transactional_id):
                current = self._transactions.get(transactional_id)
                if current is None or current.state not in PREPARED_STATES or transactional_id in self._deliveries:
                    continue  # a delivery under way completes it
                try:
                    await self._complete(current, self._coordinator_epoch(transactional_id))
                except StateLogError as exc:
                    log.warning("completion_failed", transactional_id=transactional_id, error=exc.error.name)

    async def run_expiration(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Abort timed-out transactions every transaction.abort.timed.out.transaction.cleanup.interval.ms."""
        interval_s = self._config.get_int("transaction.abort.timed.out.transaction.cleanup.interval.ms") / 1000
        task_status.started()
        while True:
            await trio.sleep(interval_s)
            await self.abort_timed_out(self._clock_ms())
            await self.expire_idle_ids(self._clock_ms())
            await self.complete_pending()  # prepared transactions whose markers could not be written earlier

    async def abort_timed_out(self, now: int) -> None:
        """Abort every ongoing transaction past its timeout at ``now`` (ms); one whose abort fails is tried again at
        the next call."""
        retry: list[str] = []
        while (transactional_id := self._timeouts.pop_due(now)) is not None:
            async with self._locks(transactional_id):
                current = self._transactions.get(transactional_id)
                if current is None or current.state != TxnState.ONGOING:
                    continue
                if not current.is_expired(now):
                    self._track(current)  # not due yet after all (cannot happen while _persist tracks every change)
                    continue
                log.info(
                    "transaction_timed_out",
                    transactional_id=transactional_id,
                    producer_id=current.producer_id,
                    epoch=current.producer_epoch,
                )
                try:
                    await self._fence_and_abort(current, self._coordinator_epoch(transactional_id))
                except StateLogError as exc:
                    log.warning("timeout_abort_failed", transactional_id=transactional_id, error=exc.error.name)
                    if self._transactions.get(transactional_id) is current:
                        retry.append(transactional_id)
        for transactional_id in retry:
            self._timeouts.schedule(transactional_id, now)

    async def expire_idle_ids(self, now: int) -> None:
        """Forget ids idle for transactional.id.expiration.ms at ``now`` (ms) (a tombstone in the log); one whose
        tombstone fails is tried again at the next call."""
        retry: list[str] = []
        while (transactional_id := self._expirations.pop_due(now)) is not None:
            async with self._locks(transactional_id):
                current = self._transactions.get(transactional_id)
                if current is None or current.state not in COMPLETED_STATES:
                    continue
                if current.last_update_timestamp_ms + self._expiration_ms >= now:
                    self._track(current)
                    continue
                try:
                    epoch = self._coordinator_epoch(transactional_id)
                    await self.state_log.write(None, transactional_id)
                    self._coordinator_epoch(transactional_id, expected=epoch)
                except StateLogError:
                    if self._transactions.get(transactional_id) is current:
                        retry.append(transactional_id)
                    continue
                del self._transactions[transactional_id]
                self._untrack(transactional_id)
                log.info("transactional_id_expired", transactional_id=transactional_id)
        for transactional_id in retry:
            self._expirations.schedule(transactional_id, now)

    def _track(self, metadata: TransactionMetadata) -> None:
        """Keep the timers and the prepared set in step with an id's current metadata."""
        transactional_id = metadata.transactional_id
        state = metadata.state
        # is_expired: start + timeout < now, so the first due clock reading is start + timeout + 1 (likewise below).
        timeout_at = metadata.start_timestamp_ms + metadata.timeout_ms + 1 if state == TxnState.ONGOING else math.inf
        self._timeouts.schedule(transactional_id, timeout_at)
        idle_at = metadata.last_update_timestamp_ms + self._expiration_ms + 1 if state in COMPLETED_STATES else math.inf
        self._expirations.schedule(transactional_id, idle_at)
        if state in PREPARED_STATES:
            self._prepared.add(transactional_id)
        else:
            self._prepared.discard(transactional_id)

    def _untrack(self, transactional_id: str) -> None:
        self._timeouts.cancel(transactional_id)
        self._expirations.cancel(transactional_id)
        self._prepared.discard(transactional_id)

    # Lookups ---------------------------------------------------------------------------------------------------

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        return self._transactions.get(transactional_id)

    def status(self, transactional_id: str) -> ErrorCode:
        """NONE when this broker coordinates the id now (its partition is loaded here), COORDINATOR_LOAD_IN_PROGRESS
        while it is being loaded, else NOT_COORDINATOR."""
        return self.partitions.status(self.state_log.partition_for(transactional_id))

    @property
    def loading(self) -> bool:
        """Whether any partition led here is still being loaded (ListTransactions answers
        COORDINATOR_LOAD_IN_PROGRESS then)."""
        return bool(self.partitions.loading)

    def _coordinator_epoch(self, transactional_id: str, *, expected: int | None = None) -> int:
        """The coordinator epoch of the id's partition; StateLogError (``status``) when it is not loaded here, or
        NOT_COORDINATOR when it is no longer ``expected`` (the partition was lost, perhaps led again since)."""
        epoch = self.partitions.owned.get(self.state_log.partition_for(transactional_id))
        if epoch is None:
            raise StateLogError(self.status(transactional_id))
        if expected is not None and epoch != expected:
            raise StateLogError(ErrorCode.NOT_COORDINATOR)
        return epoch

    def all(self) -> list[TransactionMetadata]:
        return list(self._transactions.values())

    def offsets_partition_for(self, group_id: str) -> tuple[str, int]:
        """The ``__consumer_offsets`` partition of a group (abs(hashCode) % offsets.topic.num.partitions)."""
        partitions = self._config.get_int("offsets.topic.num.partitions")
        return CONSUMER_OFFSETS_TOPIC, partition_for_key(group_id, partitions)

    # InitProducerId --------------------------------------------------------------------------------------------

    async def init_producer_id(
        self, transactional_id: str, timeout_ms: int, expected_id: int, expected_epoch: int, fenced: ErrorCode
    ) -> tuple[ErrorCode, int, int]:
        """Kafka's handleInitProducerId for a transactional id: (error, producer id, epoch)."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if not 0 < timeout_ms <= self._max_timeout_ms:
            return ErrorCode.INVALID_TRANSACTION_TIMEOUT, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        await self.state_log.topic_made()  # if not, ``status`` answers NOT_COORDINATOR
        if (status := self.status(transactional_id)) != ErrorCode.NONE:
            return status, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        async with self._locks(transactional_id):
            try:
                coordinator_epoch = self._coordinator_epoch(transactional_id)
            except StateLogError as exc:
                return exc.error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            metadata = self._transactions.get(transactional_id)
            now = self._clock_ms()
            if metadata is None:
                metadata = TransactionMetadata(
                    transactional_id,
                    self._producer_ids.next_id(),
                    NO_PRODUCER_EPOCH,
                    timeout_ms,
                    TxnState.EMPTY,
                    last_update_timestamp_ms=now,
                )
            expected = expected_id != NO_PRODUCER_ID
            if expected and not self._is_valid_producer_id(metadata, expected_id, expected_epoch):
                return fenced, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            if metadata.state in PREPARED_STATES:
                return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            if metadata.state == TxnState.ONGOING:
                # Abort the open transaction first, with a bumped epoch that fences its producer; the client
                # retries on CONCURRENT_TRANSACTIONS and then gets an epoch of its own.
                try:
                    await self._fence_and_abort(metadata, coordinator_epoch)
                except StateLogError as exc:
                    return exc.error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
                return ErrorCode.CONCURRENT_TRANSACTIONS, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            if epoch_exhausted(metadata.producer_epoch) and (not expected or expected_epoch == metadata.producer_epoch):
                new = metadata.transition(
                    TxnState.EMPTY,
                    now,
                    producer_id=self._producer_ids.next_id(),
                    producer_epoch=0,
                    last_producer_id=metadata.producer_id,
                    last_producer_epoch=metadata.producer_epoch if expected else NO_PRODUCER_EPOCH,
                    timeout_ms=timeout_ms,
                    partitions=frozenset(),
                    start_timestamp_ms=-1,
                )
            else:
                bumped = self._bumped_epoch(metadata, expected_epoch if expected else None)
                if bumped is None:
                    return fenced, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
                epoch, last_epoch = bumped
                new = metadata.transition(
                    TxnState.EMPTY,
                    now,
                    producer_epoch=epoch,
                    last_producer_epoch=last_epoch,
                    timeout_ms=timeout_ms,
                    partitions=frozenset(),
                    start_timestamp_ms=-1,
                )
            try:
                await self._persist(new, coordinator_epoch)
            except StateLogError as exc:
                return exc.error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            return ErrorCode.NONE, new.producer_id, new.producer_epoch

    @staticmethod
    def _is_valid_producer_id(metadata: TransactionMetadata, producer_id: int, epoch: int) -> bool:
        """Kafka's isValidProducerId: KIP-360 requests must name the current or the previous producer."""
        return (
            metadata.producer_epoch == NO_PRODUCER_EPOCH
            or producer_id == metadata.producer_id
            or (producer_id == metadata.last_producer_id and epoch_exhausted(epoch))
        )

    @staticmethod
    def _bumped_epoch(metadata: TransactionMetadata, expected_epoch: int | None) -> tuple[int, int] | None:
        """Kafka's prepareIncrementProducerEpoch: (new epoch, last epoch), or None when the caller is fenced."""
        bumped = metadata.producer_epoch + 1
        if expected_epoch is None:
            return bumped, NO_PRODUCER_EPOCH
        if metadata.producer_epoch == NO_PRODUCER_EPOCH or expected_epoch == metadata.producer_epoch:
            return bumped, metadata.producer_epoch
        if expected_epoch == metadata.last_producer_epoch:
            # A retry of a bump whose answer was lost: hand out the same epoch again.
            return metadata.producer_epoch, metadata.last_producer_epoch
        return None

    # AddPartitionsToTxn / AddOffsetsToTxn ---------------------------------------------------------------------

    def _check_producer(
        self, metadata: TransactionMetadata | None, producer_id: int, epoch: int, fenced: ErrorCode
    ) -> ErrorCode:
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if metadata.producer_epoch != epoch:
            return fenced
        if metadata.state in PREPARED_STATES or metadata.state == TxnState.PREPARE_EPOCH_FENCE:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.NONE

    async def add_partitions(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        partitions: Iterable[tuple[str, int]],
        fenced: ErrorCode,
    ) -> ErrorCode:
        """Add partitions to the transaction (starting it, and its timer, on the first); persisted before answering."""
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        if (status := self.status(transactional_id)) != ErrorCode.NONE:
            return status
        if transactional_id not in self._transactions:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING  # nothing is kept for an id that does not exist
        wanted = frozenset(partitions)
        async with self._locks(transactional_id):
            try:
                coordinator_epoch = self._coordinator_epoch(transactional_id)
            except StateLogError as exc:
                return exc.error
            metadata = self._transactions.get(transactional_id)
            error = self._check_producer(metadata, producer_id, epoch, fenced)
            if error != ErrorCode.NONE or metadata is None:
                return error
            if metadata.state == TxnState.ONGOING and wanted <= metadata.partitions:
                return ErrorCode.NONE
            now = self._clock_ms()
            start = metadata.start_timestamp_ms if metadata.state == TxnState.ONGOING else now
            new = metadata.transition(
                TxnState.ONGOING,
                now,
                partitions=metadata.partitions | wanted,
                start_timestamp_ms=start,
                client_transaction_version=TV_0,  # Kafka's version for AddPartitionsToTxn v0-3
            )
            try:
                await self._persist(new, coordinator_epoch)
            except StateLogError as exc:
                return exc.error
            return ErrorCode.NONE

    # EndTxn ----------------------------------------------------------------------------------------------------

    async def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        epoch: int,
        commit: bool,
        fenced: ErrorCode,
        *,
        bump_epoch: bool = False,
    ) -> tuple[ErrorCode, int, int]:
        """Kafka's handleEndTransaction from a client: prepare, write markers, complete.

        Returns (error, producer id, epoch); on success the id and epoch the producer uses next. With ``bump_epoch``
        (EndTxn v5+, KIP-890 part 2) the transaction ends with epoch + 1, or with a new producer id once the epoch
        is exhausted. A delayed copy of that EndTxn then carries a stale epoch: it is answered from the completed
        state while the id is idle (a retry) and fenced once the next transaction has begun, instead of ending it
        (KAFKA-17754). Without ``bump_epoch`` the epoch stays, as in Kafka's transaction version 1.
        """
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if (status := self.status(transactional_id)) != ErrorCode.NONE:
            return status, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        if transactional_id not in self._transactions:
            # Kafka's answer for an id it does not have; nothing is kept for it.
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        async with self._locks(transactional_id):
            try:
                coordinator_epoch = self._coordinator_epoch(transactional_id)
            except StateLogError as exc:
                return exc.error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            metadata = self._transactions.get(transactional_id)
            error = self._end_request_error(metadata, producer_id, epoch, commit, fenced)
            if error != ErrorCode.NONE or metadata is None:
                return error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            if metadata.state != TxnState.ONGOING:
                return ErrorCode.NONE, metadata.producer_id, metadata.producer_epoch
            changes: dict[str, object] = {"client_transaction_version": TV_2 if bump_epoch else TV_0}
            if bump_epoch:
                changes |= {"producer_epoch": metadata.producer_epoch + 1, "last_producer_epoch": epoch}
                if epoch_exhausted(metadata.producer_epoch):
                    changes["next_producer_id"] = self._producer_ids.next_id()
            try:
                completed = await self._prepare_and_complete(metadata, commit, coordinator_epoch, **changes)
            except StateLogError as exc:
                return exc.error, NO_PRODUCER_ID, NO_PRODUCER_EPOCH
            if completed.state in PREPARED_STATES:  # markers still under way: answer with the identity it ends with
                completed = self._completed(completed)
            return ErrorCode.NONE, completed.producer_id, completed.producer_epoch

    @staticmethod
    def _end_request_error(
        metadata: TransactionMetadata | None, producer_id: int, epoch: int, commit: bool, fenced: ErrorCode
    ) -> ErrorCode:
        """Kafka's checks of an EndTxn before acting: NONE means end the ongoing transaction, or (in any other
        state) answer that the same decision was already made."""
        if metadata is None:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        state = metadata.state
        bumped = metadata.bumps_epoch_on_end
        # A retry of an EndTxn that bumped the epoch names the epoch (or, after an overflow, the producer) before it.
        retry_on_bump = bumped and producer_id == metadata.producer_id and epoch + 1 == metadata.producer_epoch
        retry_on_overflow = (
            bumped
            and producer_id == metadata.last_producer_id
            and epoch == EXHAUSTED_EPOCH
            and metadata.producer_epoch == 0
        )
        if producer_id != metadata.producer_id and not retry_on_overflow:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if not bumped or state in (TxnState.ONGOING, TxnState.EMPTY):
            valid_epoch = epoch == metadata.producer_epoch
        elif state in PREPARED_STATES:
            valid_epoch = retry_on_bump
        else:
            valid_epoch = retry_on_bump or retry_on_overflow
        if not valid_epoch:
            return fenced
        same = {
            TxnState.ONGOING: ErrorCode.NONE,
            TxnState.COMPLETE_COMMIT: ErrorCode.NONE if commit else ErrorCode.INVALID_TXN_STATE,
            TxnState.COMPLETE_ABORT: ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.NONE,
            TxnState.PREPARE_COMMIT: ErrorCode.CONCURRENT_TRANSACTIONS if commit else ErrorCode.INVALID_TXN_STATE,
            TxnState.PREPARE_ABORT: ErrorCode.INVALID_TXN_STATE if commit else ErrorCode.CONCURRENT_TRANSACTIONS,
        }
        return same.get(state, ErrorCode.INVALID_TXN_STATE)

    async def _fence_and_abort(self, metadata: TransactionMetadata, coordinator_epoch: int) -> None:
        """Bump the epoch (fencing the current producer) and abort the ongoing transaction with it."""
        epoch = metadata.producer_epoch if epoch_exhausted(metadata.producer_epoch) else metadata.producer_epoch + 1
        fencing = metadata.transition(TxnState.PREPARE_EPOCH_FENCE, self._clock_ms(), producer_epoch=epoch)
        await self._prepare_and_complete(fencing, False, coordinator_epoch)

    async def _prepare_and_complete(
        self, metadata: TransactionMetadata, commit: bool, coordinator_epoch: int, **changes: object
    ) -> TransactionMetadata:
        prepared = metadata.transition(
            TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT, self._clock_ms(), **changes
        )
        await self._persist(prepared, coordinator_epoch)
        fault_point("txn.after_prepare")
        return await self._complete(prepared, coordinator_epoch)

    async def _complete(self, prepared: TransactionMetadata, coordinator_epoch: int) -> TransactionMetadata:
        """Write the markers of a prepared transaction, then its Complete* record (not waited for); returns it, or
        ``prepared`` when the markers are still being delivered after ``transaction.marker.wait.ms`` (the delivery
        appends the Complete* record once they are all written).

        The markers carry the prepared producer id and epoch and the coordinator epoch; a transaction whose epoch
        bump overflowed completes with its next producer id at epoch 0 (KIP-890 part 2)."""
        commit = prepared.state == TxnState.PREPARE_COMMIT
        marker = TxnMarker(
            prepared.producer_id, prepared.producer_epoch, coordinator_epoch, commit, prepared.partitions
        )
        if not await self._write_markers(marker, prepared.transactional_id):
            return prepared
        return await self._write_complete(prepared, coordinator_epoch)

    def _completed(self, prepared: TransactionMetadata) -> TransactionMetadata:
        """The Complete* state that follows ``prepared`` once its markers are written."""
        identity: dict[str, object] = {}
        if prepared.next_producer_id != NO_PRODUCER_ID:
            identity = {
                "producer_id": prepared.next_producer_id,
                "producer_epoch": 0,
                "last_producer_id": prepared.producer_id,
                "next_producer_id": NO_PRODUCER_ID,
            }
        commit = prepared.state == TxnState.PREPARE_COMMIT
        return prepared.transition(
            TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT,
            self._clock_ms(),
            partitions=frozenset(),
            **identity,
        )

    async def _write_complete(self, prepared: TransactionMetadata, coordinator_epoch: int) -> TransactionMetadata:
        fault_point("txn.before_complete")
        completed = self._completed(prepared)
        await self._persist(completed, coordinator_epoch, wait=False)
        return completed

    async def _write_markers(self, marker: TxnMarker, transactional_id: str) -> bool:
        """Deliver the markers (or join the delivery already under way) and wait up to ``transaction.marker.wait.ms``:
        True once every partition has its marker (partitions deleted meanwhile are dropped, as in Kafka), False while
        the delivery goes on in the background. NOT_COORDINATOR once a partition leader has seen a newer
        coordinator epoch or this broker lost the id's partition: the coordinator that took over completes the
        transaction. Before ``run_loader`` runs, markers are written inline with MARKER_RETRIES attempts
        (COORDINATOR_NOT_AVAILABLE after them)."""
        self._coordinator_epoch(transactional_id, expected=marker.coordinator_epoch)
        delivery = self._deliveries.get(transactional_id)
        if delivery is None or delivery.marker != marker:
            if delivery is not None:
                delivery.scope.cancel()
            delivery = _MarkerDelivery(marker)
            if self._nursery is None:
                await self._deliver(transactional_id, delivery, attempts=MARKER_RETRIES)
            else:
                self._deliveries[transactional_id] = delivery
                self._nursery.start_soon(self._deliver, transactional_id, delivery)
        with trio.move_on_after(self._marker_wait_s):
            await delivery.stopped.wait()
        if not delivery.stopped.is_set():
            if self._marker_wait_s:
                log.warning("markers_pending", transactional_id=transactional_id, producer_id=marker.producer_id)
            return False
        if self._deliveries.get(transactional_id) is delivery:
            del self._deliveries[transactional_id]
        self._coordinator_epoch(transactional_id, expected=marker.coordinator_epoch)
        if delivery.fenced:
            raise StateLogError(ErrorCode.NOT_COORDINATOR)
        if not delivery.written:
            raise StateLogError(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return True

    async def _deliver(self, transactional_id: str, delivery: _MarkerDelivery, *, attempts: int | None = None) -> None:
        """Write the markers until every partition has one (or ``attempts`` rounds), while the id's partition is
        owned at the marker's coordinator epoch; then, in the background, append the Complete* record unless a
        waiting EndTxn did."""
        try:
            with delivery.scope:
                await self._deliver_rounds(transactional_id, delivery, attempts)
        finally:
            delivery.stopped.set()
        if attempts is None and delivery.written:
            await self._complete_delivered(transactional_id, delivery)

    async def _deliver_rounds(self, transactional_id: str, delivery: _MarkerDelivery, attempts: int | None) -> None:
        marker = delivery.marker
        remaining = marker.partitions
        backoff = MARKER_RETRY_BACKOFF_S
        for attempt in range(attempts) if attempts is not None else itertools.count():
            if self.partitions.owned.get(self.state_log.partition_for(transactional_id)) != marker.coordinator_epoch:
                return
            errors = await self._markers.write(dataclasses.replace(marker, partitions=remaining))
            if MARKER_FENCED & set(errors.values()):
                log.warning(
                    "coordinator_fenced", transactional_id=transactional_id, coordinator_epoch=marker.coordinator_epoch
                )
                delivery.fenced = True
                return
            remaining = frozenset(tp for tp, error in errors.items() if error not in MARKER_SETTLED)
            if not remaining:
                delivery.written = True
                return
            log.warning(
                "marker_write_failed",
                producer_id=marker.producer_id,
                attempt=attempt,
                errors={f"{t}-{p}": errors[(t, p)].name for t, p in remaining},
            )
            await trio.sleep(backoff)
            if attempts is None:
                backoff = min(backoff * 2, MARKER_RETRY_MAX_BACKOFF_S)

    async def _complete_delivered(self, transactional_id: str, delivery: _MarkerDelivery) -> None:
        """Append the Complete* record of a transaction whose markers a background delivery wrote, unless it is no
        longer that prepared transaction (a waiting EndTxn completed it, or the id moved)."""
        marker = delivery.marker
        async with self._locks(transactional_id):
            if self._deliveries.get(transactional_id) is delivery:
                del self._deliveries[transactional_id]
            current = self._transactions.get(transactional_id)
            if (
                current is None
                or current.state != (TxnState.PREPARE_COMMIT if marker.commit else TxnState.PREPARE_ABORT)
                or (current.producer_id, current.producer_epoch) != (marker.producer_id, marker.producer_epoch)
            ):
                return
            try:
                await self._write_complete(current, marker.coordinator_epoch)
            except StateLogError as exc:
                log.warning("completion_failed", transactional_id=transactional_id, error=exc.error.name)

    async def _persist(self, metadata: TransactionMetadata, coordinator_epoch: int, *, wait: bool = True) -> None:
        """Append the change, then make it current, both only while the id's partition is owned at
        ``coordinator_epoch`` (else StateLogError NOT_COORDINATOR, and nothing changes here)."""
        transactional_id = metadata.transactional_id
        self._coordinator_epoch(transactional_id, expected=coordinator_epoch)
        await self.state_log.write(metadata, transactional_id, wait=wait)
        self._coordinator_epoch(transactional_id, expected=coordinator_epoch)
        self._transactions[transactional_id] = metadata
        self._track(metadata)

    # Produce-path check ----------------------------------------------------------------------------------------

    def coordinates(self, transactional_id: str) -> bool:
        """Whether this broker coordinates ``transactional_id`` now: it leads its ``__transaction_state`` partition
        and has loaded it (always on a single node)."""
        return self.status(transactional_id) == ErrorCode.NONE

    def verify_produce(
        self, transactional_id: str, producer_id: int, epoch: int, topic: str, partition: int
    ) -> ErrorCode:
        """A transactional write is accepted only for a partition already added to the producer's open transaction
        (KIP-890's defence against hanging transactions). On a cluster only the transactional id's coordinator can
        tell; a partition leader that is not its coordinator accepts the write unverified (as Kafka does with
        ``transaction.partition.verification.enable=false``) until leaders ask the coordinator (KIP-890's
        AddPartitionsToTxn verify-only)."""
        if not self.coordinates(transactional_id):
            return ErrorCode.NONE
        metadata = self._transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if epoch != metadata.producer_epoch:
            # A future epoch too (as Kafka's verification): accepted, it would raise the partition's epoch above the
            # coordinator's, and the coordinator's abort marker would then be refused there.
            return ErrorCode.INVALID_PRODUCER_EPOCH
        if metadata.state != TxnState.ONGOING or (topic, partition) not in metadata.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE
