"""Partitions of this node: append with idempotence checks, durable acknowledgement, reads bounded by the
high watermark or the last stable offset, wake-ups for long-polling fetches, record deletion (log start
offsets raised durably), and each partition's current leader epoch (stamped in every batch appended here and
checked against the epochs clients send).

Replication (``broker.replication``): each partition's role comes from the role table (``apply_partition_state``);
a partition no state was applied to is led by this node alone, as on the single node. For a partition led with
followers, the high watermark is the smallest log end offset over the ISR, the leader's own counted as its durable
end in fsync mode (so acks=all still means fsynced, now on every ISR member); followers read up to the log end
(``read_for_follower``), and ``wait_replicated`` answers acks=all. A follower appends what its leader sent
(``append_as_follower``) and keeps the high watermark at min(leader's, its own log end).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

import structlog
import trio
from oncelog.broker.controller.partition_change import NO_LEADER, PartitionState
from oncelog.broker.fetch_wait import FetchWaiter, VisibleEnds
from oncelog.broker.flusher import UNWAITED_FLUSH_DELAY_S, LogFlusher, SyncWaiter
from oncelog.broker.replication.leader_state import REPLICA_LAG_TIME_MAX_MS, IncarnationOf, single_incarnation
from oncelog.broker.replication.partitions import PartitionRole, PartitionRoles, Transition
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

#: ``listener(topic, partition, transition, leader_epoch)``: told of each role change of a partition here
#: (BECAME_LEADER, BECAME_FOLLOWER or STOPPED), after it took effect.
RoleListener = Callable[[str, int, Transition, int], None]

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
    #: The partition's log start offset when its log refused the records (Kafka's processFailedRecord), else -1.
    log_start_offset: int = -1


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


@dataclass(slots=True, eq=False)
class FollowerIdleMark:
    """A follower's read of a led partition that found it at the log end with nothing to learn beyond what its
    answer told it (``ReplicaManager.follower_idle_mark``). While the partition keeps this log, this role and
    state, and this log end, high watermark and log start offset, a fetch from the same position would read
    nothing and answer the same high watermark, last stable offset (it moves only with an append or the high
    watermark) and log start: it would only note the follower caught up (``ReplicaManager.sleep_idle``)."""

    log: PartitionLog
    role: PartitionRole
    state: PartitionState
    end: int
    high_watermark: int
    log_start: int


class IdleSession(Protocol):
    """A follower's fetch session as seen by ``sleep_idle`` and ``wake_idle`` (``broker.fetch_sessions``)."""

    replica: int
    incarnation: int | None
    last_read_ms: int
    asleep: dict[tuple[str, int], FollowerIdleMark]

    def fall_asleep(self, tp: tuple[str, int], mark: FollowerIdleMark) -> bool: ...

    def woken(self, tp: tuple[str, int]) -> FollowerIdleMark | None: ...


@dataclass(frozen=True)
class PartitionDeletion:
    """Outcome of deleting one partition's records: its log start offset after it (the low watermark)."""

    error: ErrorCode
    low_watermark: int = INVALID_LOW_WATERMARK


class FollowerFetchers(Protocol):
    """Where the partitions this node follows are fetched from (``broker.replication.fetcher``)."""

    def follow(self, topic: str, partition: int, leader: int, leader_epoch: int) -> None:
        """Truncate the partition as the new ``leader`` says, then fetch it from there."""
        ...

    def unfollow(self, topic: str, partition: int) -> None:
        """Stop fetching the partition (any response still on its way is dropped)."""
        ...

    def listing_changed(self, topic: str, partition: int) -> None:
        """The partition's log start moved here (retention): tell the leader at the next fetch."""
        ...


class ReplicaManager:
    """Routes appends and reads to partition logs; the only path by which the broker writes partition data."""

    def __init__(
        self,
        logs: LogManager,
        flusher: LogFlusher,
        *,
        node_id: int = 0,
        lag_time_max_ms: int = REPLICA_LAG_TIME_MAX_MS,
        lead_unassigned: bool = True,
    ) -> None:
        """``lead_unassigned``: whether this node leads a partition no state was applied to (the single node does;
        a cluster member leads only what the cluster's metadata gives it)."""
        self.logs = logs
        self.flusher = flusher
        self.node_id = node_id
        self.roles = PartitionRoles(node_id, lag_time_max_ms=lag_time_max_ms, lead_unassigned=lead_unassigned)
        #: Set by the node when it runs replica fetchers (a cluster member); None on the single node.
        self.fetchers: FollowerFetchers | None = None
        #: Called when a led partition has followers ready to join its ISR (the ISR maintenance acts on it).
        self.on_isr_expandable: Callable[[], None] = lambda: None
        #: A broker's current incarnation (its registration on a cluster): a follower's fetch counts for that one.
        self.incarnation_of: IncarnationOf = single_incarnation
        #: Consumer fetches parked on a partition (``FetchWaiter``: woken once their min_bytes may be visible) and
        #: acks=all produces waiting for the high watermark (events: woken by every advance).
        self._fetch_watchers: dict[tuple[str, int], set[trio.Event | FetchWaiter]] = defaultdict(set)
        self._visible_ends = VisibleEnds()
        #: Followers' fetches parked on a led partition: woken by every append, not only by the high watermark.
        self._replica_watchers: dict[tuple[str, int], set[trio.Event | FetchWaiter]] = defaultdict(set)
        #: Followers' fetch sessions holding a led partition asleep (``sleep_idle``): woken by ``_changed``.
        self._sleepers: dict[tuple[str, int], set[IdleSession]] = defaultdict(set)
        self._leader_epochs: dict[tuple[str, int], int] = {}
        #: The high watermarks saved before this start (``replication-offset-checkpoint``), read at the first
        #: partition state and each used once: a log opens with its high watermark at its end.
        self._saved_high_watermarks: dict[tuple[str, int], int] | None = None
        self._role_listeners: list[RoleListener] = []

    def add_role_listener(self, listener: RoleListener) -> None:
        """Call ``listener`` after every role change of a partition from now on (the coordinators load or drop the
        state of an internal partition they come to lead or stop leading). A listener must not raise."""
        self._role_listeners.append(listener)

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
        if not self.roles.leads((topic, partition)):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER, undefined  # only the leader answers (fetchOnlyFromLeader)
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
        if not self.roles.leads((topic, partition)):
            # Only the leader appends (coordinators' writes included): a follower's log takes its leader's batches.
            return PartitionAppend(ErrorCode.NOT_LEADER_OR_FOLLOWER)
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
            return PartitionAppend(
                code, message=str(exc), record_errors=record_errors, log_start_offset=partition_log.log_start_offset
            )
        except OSError as exc:
            log.error("append_failed", topic=topic, partition=partition, error=str(exc))
            return PartitionAppend(ErrorCode.KAFKA_STORAGE_ERROR, message=str(exc))
        if not result.duplicate:
            self.flusher.appended(
                partition_log, result.last_offset - result.first_offset + 1, unwaited_delay_s=unwaited_delay_s
            )
            self._wake(self._replica_watchers, (topic, partition))
            self._changed((topic, partition))
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
        if not self.roles.leads((topic, partition)):
            return PartitionRead(ErrorCode.NOT_LEADER_OR_FOLLOWER)
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
                # As Kafka's ReplicaManager: an error answer carries no offsets (-1 high watermark, LSO, log start).
                return PartitionRead(ErrorCode.OFFSET_OUT_OF_RANGE)
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
            self._changed((topic, partition))
            start = partition_log.log_start_offset
            results[(topic, partition)] = PartitionDeletion(ErrorCode.NONE, start)
            log.info("records_deleted", topic=topic, partition=partition, log_start_offset=start)
        return results

    # Long polling ----------------------------------------------------------------------------------------------

    def watch(
        self, partitions: list[tuple[str, int]], event: trio.Event | FetchWaiter, *, replica: bool = False
    ) -> None:
        """Set ``event`` when any of ``partitions`` makes new data visible (a ``FetchWaiter``: once its bytes may
        be; ``replica``: when data is appended, for a follower's fetch), or when its role changes."""
        watchers = self._replica_watchers if replica else self._fetch_watchers
        for tp in partitions:
            watchers[tp].add(event)

    def unwatch(
        self, partitions: list[tuple[str, int]], event: trio.Event | FetchWaiter, *, replica: bool = False
    ) -> None:
        all_watchers = self._replica_watchers if replica else self._fetch_watchers
        for tp in partitions:
            watchers = all_watchers.get(tp)
            if watchers is not None:
                watchers.discard(event)
                if not watchers:
                    del all_watchers[tp]

    def high_watermark_advanced(self, partition_log: PartitionLog) -> None:
        """Called when a partition's visible data grows: wake the acks=all produces waiting on it, and the fetches
        whose min_bytes may now be visible (``broker.fetch_wait``)."""
        tp = (partition_log.topic, partition_log.partition)
        self._changed(tp)
        watchers = self._fetch_watchers.get(tp)
        growth = self._visible_ends.advance(partition_log, measure=bool(watchers))
        if not watchers:
            return
        if growth is None:
            self._wake(self._fetch_watchers, tp)
            return
        woken = [w for w in watchers if not isinstance(w, FetchWaiter) or w.grown(*growth)]
        for waiter in woken:
            waiter.set()
            watchers.discard(waiter)
        if not watchers:
            del self._fetch_watchers[tp]

    @staticmethod
    def _wake(all_watchers: dict[tuple[str, int], set[trio.Event | FetchWaiter]], tp: tuple[str, int]) -> None:
        watchers = all_watchers.pop(tp, None)
        for event in watchers or ():
            event.set()

    # Replication -----------------------------------------------------------------------------------------------

    def leads(self, topic: str, partition: int) -> bool:
        """True when this node leads the partition (on the single node: every partition)."""
        return self.roles.leads((topic, partition))

    def isr_size(self, topic: str, partition: int) -> int:
        """Members of the partition's ISR, the leader included (1 on the single node)."""
        return self.roles.isr_size((topic, partition))

    def has_follower(self, replica: int) -> bool:
        """True when ``replica`` follows a partition led here (by an applied state)."""
        return any(replica in role.leading.followers for role in self.roles.leading().values() if role.leading)

    def replicated(self, topic: str, partition: int) -> bool:
        """True when the partition is led here with followers: acks=all then waits for the high watermark."""
        role = self.roles.get((topic, partition))
        return role is not None and role.leading is not None and len(role.state.replicas) > 1

    def apply_partition_state(self, topic: str, partition: int, state: PartitionState, *, now_ms: int) -> Transition:
        """Take the role ``state`` gives this node for the partition (``broker.replication.partitions``): lead it,
        follow its leader (truncating first, see ``broker.replication.fetcher``) or stop. Raises LookupError when
        the partition has no log here (create it first)."""
        tp = (topic, partition)
        partition_log = self.logs.get(topic, partition)
        if partition_log is None:
            raise LookupError(f"no log for {topic}-{partition}")
        if self.roles.get(tp) is None:
            self._restore_high_watermark(partition_log)
        transition = self.roles.apply(
            tp,
            state,
            log_end_offset=partition_log.log_end_offset,
            high_watermark=partition_log.high_watermark,
            now_ms=now_ms,
        )
        if transition is Transition.IGNORED:
            return transition
        role = self.roles.get(tp)
        assert role is not None
        self.set_leader_epoch(topic, partition, state.leader_epoch)
        if transition is Transition.BECAME_LEADER:
            # The new epoch starts at the log end (Kafka's maybeAssignEpochStartOffset): OffsetForLeaderEpoch then
            # tells a follower where its older epoch ended here even before this leader appends anything.
            partition_log.maybe_assign_epoch_start(state.leader_epoch)
        if transition is not Transition.UPDATED:
            log.info(
                "partition_role",
                topic=topic,
                partition=partition,
                transition=transition.value,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                isr=list(state.isr),
            )
        if self.fetchers is not None and transition is not Transition.UPDATED:
            if role.follows is not None:
                self.fetchers.follow(topic, partition, role.follows, state.leader_epoch)
            else:
                self.fetchers.unfollow(topic, partition)
        if role.leading is not None:
            self._advance_leader_high_watermark(partition_log)
        # Parked fetches and acks=all produces look again: they may have to answer NOT_LEADER_OR_FOLLOWER now.
        self._wake(self._fetch_watchers, tp)
        self._wake(self._replica_watchers, tp)
        self._changed(tp)
        if transition is not Transition.UPDATED:
            for listener in self._role_listeners:
                listener(topic, partition, transition, state.leader_epoch)
        return transition

    def resign_leadership(self, now_ms: int) -> None:
        """This node lost its etcd session: another broker may lead its partitions already, so it leads none (and
        follows nobody) until the cluster's metadata gives it roles again; re-applying the same state restores
        them."""
        for (topic, partition), role in list(self.roles.leading().items()):
            fenced = dataclasses.replace(role.state, leader=NO_LEADER)
            self.apply_partition_state(topic, partition, fenced, now_ms=now_ms)

    def forget(self, topic: str, partition: int) -> None:
        """The partition is deleted here: no role, no fetching (a topic created again starts as the single node's)."""
        self.roles.forget((topic, partition))
        self._visible_ends.forget(topic, partition)
        if self.fetchers is not None:
            self.fetchers.unfollow(topic, partition)
        self._wake(self._fetch_watchers, (topic, partition))
        self._wake(self._replica_watchers, (topic, partition))
        self._changed((topic, partition))
        for listener in self._role_listeners:
            listener(topic, partition, Transition.STOPPED, self.leader_epoch(topic, partition))

    def _restore_high_watermark(self, partition_log: PartitionLog) -> None:
        """A partition's first state since the start: its high watermark goes back to the one saved before (Kafka
        initialises a replica's from the checkpoint), so a replica that opened with it at its log end does not
        expose what its followers may not have; a leader alone in its ISR moves it to its end again at once."""
        if self._saved_high_watermarks is None:
            try:
                self._saved_high_watermarks = self.logs.checkpointed_high_watermarks()
            except (OSError, storage_errors.StorageError) as exc:
                log.warning("high_watermarks_unreadable", error=str(exc))
                self._saved_high_watermarks = {}
        saved = self._saved_high_watermarks.pop((partition_log.topic, partition_log.partition), None)
        if saved is not None and saved < partition_log.high_watermark:
            partition_log.update_high_watermark(saved)

    def adopt_isr(self, topic: str, partition: int, state: PartitionState) -> None:
        """The controller accepted this leader's ISR change (``broker.replication.isr``)."""
        partition_log = self.logs.get(topic, partition)
        if partition_log is None or not self.roles.adopt((topic, partition), state):
            return
        log.info("isr_changed", topic=topic, partition=partition, isr=list(state.isr))
        self._changed((topic, partition))
        self._advance_leader_high_watermark(partition_log)
        self._wake(self._fetch_watchers, (topic, partition))

    @staticmethod
    def _local_end(partition_log: PartitionLog) -> int:
        """The leader's own log end offset for the high watermark: its durable end in fsync mode."""
        if partition_log.config.fsync_before_ack:
            return min(partition_log.durable_offset, partition_log.log_end_offset)
        return partition_log.log_end_offset

    def high_watermark_for(self, partition_log: PartitionLog, local_end: int) -> int:
        """The high watermark the flusher may set once the log's data below ``local_end`` is safe on this node:
        ``local_end`` on the single node, capped by the followers in the ISR on a leader, by the leader's high
        watermark on a follower, and the current one on a stopped replica."""
        role = self.roles.get((partition_log.topic, partition_log.partition))
        if role is None:
            return local_end
        if role.leading is not None:
            role.leading.advance_high_watermark(local_end)
            return role.leading.high_watermark
        if role.follows is not None:
            return min(role.leader_high_watermark, partition_log.log_end_offset)
        return partition_log.high_watermark

    def _advance_leader_high_watermark(self, partition_log: PartitionLog) -> None:
        high_watermark = self.high_watermark_for(partition_log, self._local_end(partition_log))
        if high_watermark > partition_log.high_watermark:
            partition_log.update_high_watermark(high_watermark)
            self.high_watermark_advanced(partition_log)

    def read_for_follower(
        self, topic: str, partition: int, replica: int, offset: int, max_bytes: int, now_ms: int, *, min_one_batch: bool
    ) -> PartitionRead:
        """A follower's fetch from ``offset`` (its log end offset): note its progress, move the high watermark, and
        read whole batches up to the log end (not the high watermark). NOT_LEADER_OR_FOLLOWER unless this node leads
        the partition by an applied state and ``replica`` is one of its replicas."""
        partition_log = self.logs.get(topic, partition)
        if partition_log is None:
            return PartitionRead(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        role = self.roles.get((topic, partition))
        if role is None or role.leading is None or replica not in role.leading.followers:
            return PartitionRead(ErrorCode.NOT_LEADER_OR_FOLLOWER)
        read = PartitionRead(ErrorCode.NONE, log_start_offset=partition_log.log_start_offset)
        if not partition_log.log_start_offset <= offset <= partition_log.log_end_offset:
            read.error = ErrorCode.OFFSET_OUT_OF_RANGE
        elif role.leading.still_caught_up(replica, offset, partition_log.log_end_offset, now_ms, self.incarnation_of):
            pass  # an in-sync follower at our end, as at its last fetch: nothing to move, nothing to read
        else:
            incarnation_of = self.incarnation_of
            role.leading.record_fetch(replica, offset, partition_log.log_end_offset, now_ms, incarnation_of(replica))
            self._advance_leader_high_watermark(partition_log)
            if role.leading.ready_to_join(now_ms, incarnation_of):
                self.on_isr_expandable()
            if offset < partition_log.log_end_offset:
                try:
                    read.records = partition_log.read(offset, max_bytes, min_one_batch=min_one_batch)
                except storage_errors.StorageError as exc:
                    read.error = error_code_for(exc)
                except OSError as exc:
                    log.error("read_failed", topic=topic, partition=partition, error=str(exc))
                    read.error = ErrorCode.KAFKA_STORAGE_ERROR
        read.high_watermark = partition_log.high_watermark
        read.last_stable_offset = partition_log.last_stable_offset
        return read

    def follower_idle_mark(
        self, topic: str, partition: int, offset: int, read: PartitionRead
    ) -> FollowerIdleMark | None:
        """The mark of ``read`` (just made by ``read_for_follower`` from ``offset``) when it found the follower at
        the log end with no error, else None."""
        partition_log = self.logs.get(topic, partition)
        role = self.roles.get((topic, partition))
        if (
            read.error != ErrorCode.NONE
            or read.records
            or partition_log is None
            or role is None
            or role.leading is None
            or offset != partition_log.log_end_offset
        ):
            return None
        return FollowerIdleMark(
            partition_log, role, role.state, offset, partition_log.high_watermark, partition_log.log_start_offset
        )

    # Idle partitions of followers' fetch sessions (``broker.fetch_sessions``) ----------------------------------

    def sleep_idle(self, session: IdleSession, marks: Mapping[tuple[str, int], FollowerIdleMark]) -> None:
        """Put to sleep in ``session`` each partition whose mark (made by the read its answer carries) still holds:
        nothing it saw has moved, and the follower, of the incarnation registered now, is in the ISR at the log end.
        Each read skipped from then on would only note it caught up (``LeaderReplicaState.still_caught_up``); it
        is noted so when the partition wakes (``_changed``, ``wake_idle``)."""
        replica = session.replica
        self.wake_if_reregistered(session)  # (while its fetch was parked)
        incarnation = session.incarnation = self.incarnation_of(replica)
        for tp, mark in marks.items():
            if self._mark_holds(tp, mark, replica, incarnation) and session.fall_asleep(tp, mark):
                self._sleepers[tp].add(session)

    def _mark_holds(self, tp: tuple[str, int], mark: FollowerIdleMark, replica: int, incarnation: int | None) -> bool:
        leading = mark.role.leading
        if leading is None:
            return False
        progress = leading.followers.get(replica)
        return (
            progress is not None
            and progress.log_end_offset == mark.end
            and progress.incarnation == incarnation
            and replica in leading.isr
            and self.logs.get(*tp) is mark.log
            and self.roles.get(tp) is mark.role
            and mark.role.state is mark.state
            and mark.log.log_end_offset == mark.end
            and mark.log.high_watermark == mark.high_watermark
            and mark.log.log_start_offset == mark.log_start
        )

    def wake_idle(self, session: IdleSession, partitions: Iterable[tuple[str, int]]) -> None:
        """Read these partitions of ``session`` again from its next round (those asleep), noting the follower
        caught up there until its last read."""
        for tp in partitions:
            sleepers = self._sleepers.get(tp)
            if sleepers is None or session not in sleepers:
                continue
            sleepers.discard(session)
            if not sleepers:
                del self._sleepers[tp]
            self._wake_asleep(session, tp)

    def wake_if_reregistered(self, session: IdleSession) -> None:
        """Before a round of ``session``: if its follower's registration changed since its partitions fell asleep,
        wake them all (a fetch counts for the incarnation registered now, ``LeaderReplicaState.record_fetch``)."""
        if session.asleep and self.incarnation_of(session.replica) != session.incarnation:
            self.wake_idle(session, list(session.asleep))

    def release_session(self, session: IdleSession) -> None:
        """``session`` was closed or replaced: wake what it held asleep (``FetchSessions``' ``on_close``)."""
        self.wake_idle(session, list(session.asleep))

    def log_start_moved(self, topic: str, partition: int) -> None:
        """Retention raised the partition's log start offset: followers asleep there must be told it, and the
        leader, if this node follows it."""
        self._changed((topic, partition))
        if self.fetchers is not None:
            self.fetchers.listing_changed(topic, partition)

    def _changed(self, tp: tuple[str, int]) -> None:
        """Something a follower's answer tells of ``tp`` moved (its log end, high watermark or log start, its role or
        ISR): wake it in every session holding it asleep."""
        for session in self._sleepers.pop(tp, ()):
            self._wake_asleep(session, tp)

    @staticmethod
    def _wake_asleep(session: IdleSession, tp: tuple[str, int]) -> None:
        """Wake ``tp`` in ``session`` (registered asleep there), noting the reads it skipped."""
        mark = session.woken(tp)
        if mark is not None and mark.role.leading is not None:
            mark.role.leading.caught_up_while_idle(session.replica, mark.end, session.last_read_ms)

    def replication_outcome(self, topic: str, partition: int, end_offset: int) -> ErrorCode | None:
        """How an acks=all append ending at ``end_offset`` is answered now, or None while it must wait: once the
        high watermark passes it, NONE with enough in-sync replicas, else NOT_ENOUGH_REPLICAS_AFTER_APPEND
        (Kafka's ``Partition.checkEnoughReplicasReachOffset``); NOT_LEADER_OR_FOLLOWER once leadership moved."""
        partition_log = self.logs.get(topic, partition)
        if partition_log is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if not self.leads(topic, partition):
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if partition_log.high_watermark < end_offset:
            return None
        if self.isr_size(topic, partition) < partition_log.config.min_insync_replicas:
            return ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        return ErrorCode.NONE

    async def wait_replicated(self, topic: str, partition: int, end_offset: int, deadline: float) -> ErrorCode:
        """Wait for ``replication_outcome``; REQUEST_TIMED_OUT at ``deadline`` (trio time)."""
        tp = (topic, partition)
        while (outcome := self.replication_outcome(topic, partition, end_offset)) is None:
            if trio.current_time() >= deadline:
                return ErrorCode.REQUEST_TIMED_OUT
            moved = trio.Event()
            self.watch([tp], moved)
            try:
                with trio.move_on_at(deadline):
                    await moved.wait()
            finally:
                self.unwatch([tp], moved)
        return outcome

    async def wait_committed(self, topic: str, partition: int, end_offset: int, timeout_s: float) -> ErrorCode:
        """A coordinator's acks=all: wait until the partition's data below ``end_offset`` is durable here and, on a
        partition led with followers, replicated to the ISR (``wait_replicated``, REQUEST_TIMED_OUT after
        ``timeout_s``). The single node only waits for the fsync."""
        error = await self.wait_durable(topic, partition, end_offset)
        if error != ErrorCode.NONE or not self.replicated(topic, partition):
            return error
        return await self.wait_replicated(topic, partition, end_offset, trio.current_time() + timeout_s)

    def append_as_follower(
        self, topic: str, partition: int, records: bytes | memoryview, now_ms: int
    ) -> PartitionAppend:
        """Append what the leader sent, keeping its offsets and epochs (``PartitionLog.append_as_follower``); the
        flush policy applies as to any append."""
        partition_log = self.logs.get(topic, partition)
        if partition_log is None:
            return PartitionAppend(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        before = partition_log.log_end_offset
        try:
            result = partition_log.append_as_follower(records, now_ms=now_ms)
        except storage_errors.StorageError as exc:
            code = error_code_for(exc)
            log.warning("follower_append_failed", topic=topic, partition=partition, error=code.name, reason=str(exc))
            return PartitionAppend(code, message=str(exc))
        except OSError as exc:
            log.error("follower_append_failed", topic=topic, partition=partition, error=str(exc))
            return PartitionAppend(ErrorCode.KAFKA_STORAGE_ERROR, message=str(exc))
        if partition_log.log_end_offset > before:
            self.flusher.appended(partition_log, partition_log.log_end_offset - before)
        return PartitionAppend(ErrorCode.NONE, result)

    def follower_high_watermark(self, topic: str, partition: int, leader_high_watermark: int) -> None:
        """The leader's high watermark arrived: this follower's becomes min(it, own log end), lower than before too
        (Kafka's follower ``updateHighWatermark``): a replica restarted with its high watermark at its log end (it
        is not persisted) takes the leader's, so it does not overstate it if it leads next."""
        partition_log = self.logs.get(topic, partition)
        role = self.roles.get((topic, partition))
        if partition_log is None or role is None or role.follows is None:
            return
        role.leader_high_watermark = leader_high_watermark
        high_watermark = min(leader_high_watermark, partition_log.log_end_offset)
        if high_watermark != partition_log.high_watermark:
            partition_log.update_high_watermark(high_watermark)
            self.high_watermark_advanced(partition_log)

    def follower_log_start_offset(self, topic: str, partition: int, leader_log_start_offset: int) -> None:
        """The leader's log start offset arrived: raise this follower's to it (records the leader deleted go here
        too: retention, DeleteRecords), durably, within the follower's high watermark (Kafka's follower
        ``maybeIncrementLogStartOffset``)."""
        partition_log = self.logs.get(topic, partition)
        if partition_log is None:
            return
        target = min(leader_log_start_offset, partition_log.high_watermark)
        if target <= partition_log.log_start_offset:
            return
        try:
            self.logs.advance_log_start_offsets({(topic, partition): target})
        except storage_errors.StorageError as exc:
            log.warning("follower_log_start_not_raised", topic=topic, partition=partition, error=str(exc))

    def restart_follower_at(self, topic: str, partition: int, offset: int) -> None:
        """The leader's log starts above this follower's end: empty the log and go on from ``offset`` (Kafka's
        truncateFullyAndStartAt)."""
        partition_log = self.logs.get(topic, partition)
        if partition_log is None:
            return
        log.info(
            "follower_restarted_at", topic=topic, partition=partition, offset=offset, was=partition_log.log_end_offset
        )
        partition_log.truncate_fully_and_start_at(offset)

    def truncate_follower(self, topic: str, partition: int, offset: int) -> None:
        """Cut a follower's divergent tail: every batch at or above ``offset`` goes (KIP-101/279)."""
        partition_log = self.logs.get(topic, partition)
        if partition_log is None or offset >= partition_log.log_end_offset:
            return
        log.info(
            "follower_truncated", topic=topic, partition=partition, offset=offset, was=partition_log.log_end_offset
        )
        partition_log.truncate_to(offset)
