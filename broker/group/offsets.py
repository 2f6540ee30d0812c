"""Committed offsets of the group coordinator: OffsetCommit, TxnOffsetCommit, OffsetFetch, OffsetDelete, expiration,
the offsets of deleted topics, loading.

Guarantees:
- An OffsetCommit is answered only after its records are fsynced in ``__consumer_offsets``; the cache changes then.
  So is an OffsetDelete, whose tombstones remove the partitions' committed and pending transactional offsets, in
  the cache and when the log is replayed.
- TxnOffsetCommit is accepted only from the transactional id's current producer (id and epoch) whose open
  transaction holds the group's ``__consumer_offsets`` partition (AddOffsetsToTxn); its offsets are appended as a
  transactional batch of that producer and stay pending -- invisible to OffsetFetch, reported as
  UNSTABLE_OFFSET_COMMIT under require_stable -- until the COMMIT marker reaches that partition (ABORT drops them).
- For one partition of one group, the offset whose record is later in the log wins, whatever the order in which
  commits and markers complete.
- A topic's deletion first removes every group's committed and pending transactional offsets of it (durable
  tombstones; ``delete_partition_offsets``), then the topic goes; at start, before serving, offsets of partitions
  that do not exist are removed the same way. So a topic created again under a deleted one's name has no offsets.
- Expiration (every ``offsets.retention.check.interval.ms``) follows Kafka's removeExpiredOffsets
  (``Group.expired_offsets``): Empty groups lose offsets older than ``offsets.retention.minutes``, Stable
  ``consumer`` groups those of topics no member subscribes to. Like Kafka's cleanupGroupMetadata it looks at every
  group, once per interval (10 minutes by default); it yields to the event loop every ``GROUPS_PER_CHECKPOINT``
  groups and takes a group's lock only when that group has something to remove.
- ``_install`` rebuilds a ``__consumer_offsets`` partition's groups, offsets and pending transactional offsets from
  its log when this broker comes to lead it (the single node: every partition, before serving); ``_unload`` drops
  them when it stops leading it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

import structlog
import trio
from oncelog.broker.group.metadata import CommittedOffset, Group, Member
from oncelog.broker.group.state import GroupEvent, GroupState, loaded_state
from oncelog.broker.metadata import CONSUMER_OFFSETS_TOPIC
from oncelog.broker.txn.metadata import TxnState
from oncelog.protocol import ErrorCode
from oncelog.protocol.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from oncelog.protocol.internal.group_log import OffsetValue, encode_group_key, encode_offset_key, encode_offset_value

if TYPE_CHECKING:
    from collections.abc import Callable

    from oncelog.broker.config import BrokerConfig
    from oncelog.broker.group.offsets_log import GroupLog, LoadedGroup
    from oncelog.broker.keyed_locks import KeyedLocks
    from oncelog.broker.metadata import MetadataStore
    from oncelog.broker.txn.metadata import TransactionMetadata

log = structlog.get_logger(__name__)

#: Kafka's OffsetFetchResponse.INVALID_OFFSET / NO_METADATA for a partition without a committed offset.
INVALID_OFFSET = -1
NO_METADATA = ""

TopicPartition = tuple[str, int]

#: Groups a pass over every group (offset expiration, a deleted topic's offsets) looks at between two scheduler
#: checkpoints: such a pass never holds the event loop for more than this many groups' offsets.
GROUPS_PER_CHECKPOINT = 256


class TransactionLookup(Protocol):
    """What TxnOffsetCommit checks of the transaction coordinator."""

    def coordinates(self, transactional_id: str) -> bool:
        """This broker coordinates ``transactional_id``'s transactions now."""
        ...

    def get(self, transactional_id: str) -> TransactionMetadata | None:
        """The id's current transaction metadata, None for an unknown id."""
        ...


class ConsumerGroupLookup(Protocol):
    """What the classic coordinator asks of the KIP-848 groups, which keep their offsets here."""

    def is_consumer_group(self, group_id: str) -> bool: ...

    def check_commit(self, group_id: str, member_id: str, member_epoch: int, api_version: int | None) -> ErrorCode:
        """OffsetCommit (``api_version``) or TxnOffsetCommit (None) by a member of a KIP-848 group."""
        ...

    def subscribed_topics(self, group_id: str) -> set[str]: ...

    def install(self, group_id: str, records: dict[bytes, bytes]) -> None:
        """Rebuild a KIP-848 group from its records (loading)."""
        ...

    def unload(self, leaves: Callable[[str], bool]) -> None: ...


class OffsetsMixin:
    """The offset half of GroupCoordinator (which provides the attributes declared here)."""

    _config: BrokerConfig
    _metadata: MetadataStore
    _clock_ms: Callable[[], int]
    _deleting_topics: set[str]
    transactions: TransactionLookup | None
    consumer_groups: ConsumerGroupLookup | None
    group_log: GroupLog
    _groups: dict[str, Group]
    _locks: KeyedLocks[str]
    _pending_txn: dict[tuple[int, int], set[str]]
    #: (offsets partition, producer id) -> a flag per TxnOffsetCommit append of that producer under way there, set
    #: when one of the producer's markers reaches the partition meanwhile (its transaction ended: the offsets with it).
    _txn_appends: dict[tuple[int, int], list[list[bool]]]
    #: Set once ``run`` started the timers (groups loaded later are scheduled at once).
    _running: bool

    @property
    def _kip848(self) -> ConsumerGroupLookup:
        """The KIP-848 groups (set by the node once both coordinators exist)."""
        assert self.consumer_groups is not None, "the node wires consumer_groups before serving"
        return self.consumer_groups

    def _schedule(self, group: Group) -> None: ...

    def status(self, group_id: str) -> ErrorCode: ...

    # Loading ---------------------------------------------------------------------------------------------------

    def _install(self, partition: int, epoch: int, loaded_groups: dict[str, LoadedGroup]) -> None:
        """Make the groups of a loaded ``__consumer_offsets`` partition current. Once the coordinator runs, their
        members' sessions start now; before, ``run`` starts them."""
        now = trio.current_time() if self._running else 0.0
        for group_id, loaded in loaded_groups.items():
            if loaded.consumer:  # a KIP-848 group: its coordinator rebuilds it; offsets are kept here
                self._kip848.install(group_id, loaded.consumer)
            group = Group(group_id, state_timestamp_ms=self._clock_ms())
            meta = loaded.metadata
            if meta is not None:
                group.generation_id = meta.generation
                group.protocol_type = meta.protocol_type or None
                group.protocol_name = meta.protocol
                group.state_timestamp_ms = meta.current_state_timestamp_ms
                for m in meta.members:
                    protocols = [(meta.protocol, m.subscription)] if meta.protocol is not None else []
                    group.add(
                        Member(
                            member_id=m.member_id,
                            group_instance_id=m.group_instance_id,
                            client_id=m.client_id,
                            client_host=m.client_host,
                            rebalance_timeout_ms=m.rebalance_timeout_ms,
                            session_timeout_ms=m.session_timeout_ms,
                            protocol_type=meta.protocol_type,
                            protocols=protocols,
                            assignment=m.assignment,
                            last_heartbeat_s=now,
                        )
                    )
                if meta.leader in group.members:
                    group.leader_id = meta.leader
                group.refresh_subscribed_topics()
                group.state = loaded_state(bool(group.members))
            elif not loaded.offsets and not loaded.pending:
                continue
            group.offsets = {tp: CommittedOffset(v, o) for tp, (v, o) in loaded.offsets.items()}
            for producer_id, offsets in loaded.pending.items():
                group.pending_txn_offsets[producer_id] = {tp: CommittedOffset(v, o) for tp, (v, o) in offsets.items()}
                self._pending_txn.setdefault((partition, producer_id), set()).add(group_id)
            self._groups[group_id] = group
            if self._running:
                self._schedule(group)

    async def remove_orphaned_offsets(self) -> None:
        """Once loaded, before serving: tombstone the offsets of partitions that do not exist, as a deletion of
        their topic would have (``delete_partition_offsets``). A deletion removes them before its topic, so these
        come from a broker version that kept them; without this, a topic created again under the same name would
        see them. A failed append is logged and the remaining groups keep such offsets until the next start."""
        metadata = self._metadata
        error = await self.delete_partition_offsets(lambda topic, index: not metadata.has_partition(topic, index))
        if error != ErrorCode.NONE:
            log.error("orphaned_offsets_not_removed", error=error.name)

    # Markers ---------------------------------------------------------------------------------------------------

    def on_marker(self, topic: str, partition: int, producer_id: int, commit: bool) -> None:
        """A transaction marker reached a partition: commit or drop the producer's pending offsets there."""
        if topic != CONSUMER_OFFSETS_TOPIC:
            return
        for appending in self._txn_appends.get((partition, producer_id), ()):
            appending[0] = True
        for group_id in self._pending_txn.pop((partition, producer_id), ()):
            group = self._groups.get(group_id)
            if group is not None:
                group.complete_txn_offsets(producer_id, commit)
                log.debug("txn_offsets_completed", group_id=group_id, producer_id=producer_id, commit=commit)

    # OffsetCommit ----------------------------------------------------------------------------------------------

    def _validate_offsets(self, offsets: dict[TopicPartition, OffsetValue]) -> dict[TopicPartition, ErrorCode]:
        max_metadata = self._config.get_int("offset.metadata.max.bytes")
        errors: dict[TopicPartition, ErrorCode] = {}
        for (topic, partition), value in offsets.items():
            if topic in self._deleting_topics or not self._metadata.has_partition(topic, partition):
                errors[(topic, partition)] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif len(value.metadata.encode()) > max_metadata:
                errors[(topic, partition)] = ErrorCode.OFFSET_METADATA_TOO_LARGE
        return errors

    async def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetValue],
        api_version: int = 8,
    ) -> dict[TopicPartition, ErrorCode]:
        """Kafka's handleCommitOffsets: one error per partition."""
        if not group_id:
            return dict.fromkeys(offsets, ErrorCode.INVALID_GROUP_ID)
        await self.group_log.topic_made()  # if not, ``status`` answers NOT_COORDINATOR
        async with self._locks(group_id):
            if (error := self.status(group_id)) != ErrorCode.NONE:
                return dict.fromkeys(offsets, error)
            if self._kip848.is_consumer_group(group_id):
                error = self._kip848.check_commit(group_id, member_id, generation_id, api_version)
                if error != ErrorCode.NONE:
                    return dict.fromkeys(offsets, error)
                return await self._store_offsets(self._offsets_holder(group_id), offsets)
            group = self._groups.get(group_id)
            if group is None:
                if generation_id >= 0:
                    # Not managed here, or a commit from a generation long gone: refuse it.
                    return dict.fromkeys(offsets, ErrorCode.ILLEGAL_GENERATION)
                group = Group(group_id, state_timestamp_ms=self._clock_ms())
                self._groups[group_id] = group
            error = self._check_commit(group, generation_id, member_id, group_instance_id)
            if error != ErrorCode.NONE:
                return dict.fromkeys(offsets, error)
            return await self._store_offsets(group, offsets)

    def _check_commit(
        self, group: Group, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.static_member_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if generation_id < 0 and group.is_(GroupState.EMPTY):
            return ErrorCode.NONE  # a group that only stores offsets here
        if group.is_(GroupState.COMPLETING_REBALANCE):
            return ErrorCode.REBALANCE_IN_PROGRESS
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        member.last_heartbeat_s = trio.current_time()
        return ErrorCode.NONE

    async def _store_offsets(
        self,
        group: Group,
        offsets: dict[TopicPartition, OffsetValue],
        *,
        producer_id: int = -1,
        producer_epoch: int = -1,
    ) -> dict[TopicPartition, ErrorCode]:
        errors = self._validate_offsets(offsets)
        valid = [(tp, v) for tp, v in offsets.items() if tp not in errors]
        if valid:
            records = [(encode_offset_key(group.group_id, t, p), encode_offset_value(v)) for (t, p), v in valid]
            # A marker of this producer may reach the partition while the append waits to be durable (a fencing
            # InitProducerId aborts the transaction): then the offsets, appended before it, ended with it, and are
            # not kept pending, as no later marker would end them (Kafka adds them before the append for this).
            key = (self.group_log.partition_for(group.group_id), producer_id)
            ended = [False]
            self._txn_appends.setdefault(key, []).append(ended)
            try:
                error, first = await self.group_log.append(
                    group.group_id, records, producer_id=producer_id, producer_epoch=producer_epoch
                )
            finally:
                under_way = self._txn_appends[key]
                under_way[:] = [flag for flag in under_way if flag is not ended]
                if not under_way:
                    del self._txn_appends[key]
            if error != ErrorCode.NONE:
                errors.update(dict.fromkeys((tp for tp, _ in valid), error))
            elif producer_id >= 0 and ended[0]:
                log.info("txn_offsets_ended_while_appended", group_id=group.group_id, producer_id=producer_id)
            elif producer_id >= 0:
                pending = group.pending_txn_offsets.setdefault(producer_id, {})
                for i, (tp, value) in enumerate(valid):
                    pending[tp] = CommittedOffset(value, first + i)
                partition = self.group_log.partition_for(group.group_id)
                self._pending_txn.setdefault((partition, producer_id), set()).add(group.group_id)
            else:
                for i, (tp, value) in enumerate(valid):
                    current = group.offsets.get(tp)
                    if current is None or current.record_offset < first + i:
                        group.offsets[tp] = CommittedOffset(value, first + i)
        return {tp: errors.get(tp, ErrorCode.NONE) for tp in offsets}

    # TxnOffsetCommit -------------------------------------------------------------------------------------------

    async def txn_commit_offsets(
        self,
        transactional_id: str,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[TopicPartition, OffsetValue],
        fenced: ErrorCode,
    ) -> dict[TopicPartition, ErrorCode]:
        """Kafka's handleTxnCommitOffsets (with KIP-890's check that the partition is in the transaction).

        COORDINATOR_NOT_AVAILABLE while ``__consumer_offsets`` cannot be created (fewer live brokers than its
        replication factor, etcd away): Kafka's transaction verification finds no such partition
        (UNKNOWN_TOPIC_OR_PARTITION), which its group coordinator answers so."""
        if not group_id:
            return dict.fromkeys(offsets, ErrorCode.INVALID_GROUP_ID)
        if not await self.group_log.topic_made():
            return dict.fromkeys(offsets, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        async with self._locks(group_id):
            if (error := self.status(group_id)) != ErrorCode.NONE:
                return dict.fromkeys(offsets, error)
            group = self._offsets_holder(group_id)
            if self._kip848.is_consumer_group(group_id):
                error = self._kip848.check_commit(group_id, member_id, generation_id, None)
            else:
                error = self._check_txn_commit(group, generation_id, member_id, group_instance_id)
            if error == ErrorCode.NONE:
                # Checked last, with no await before the append: a marker cannot slip in between.
                error = self._check_transaction(transactional_id, group_id, producer_id, producer_epoch, fenced)
            if error != ErrorCode.NONE:
                return dict.fromkeys(offsets, error)
            result = await self._store_offsets(group, offsets, producer_id=producer_id, producer_epoch=producer_epoch)
            return {tp: fenced if error == ErrorCode.INVALID_PRODUCER_EPOCH else error for tp, error in result.items()}

    def _offsets_holder(self, group_id: str) -> Group:
        """The group's entry holding its offsets (made Empty when missing): a KIP-848 group's offsets are kept in
        one too, so both protocols share them and a group switching protocol keeps them."""
        group = self._groups.get(group_id)
        if group is None:
            group = Group(group_id, state_timestamp_ms=self._clock_ms())
            self._groups[group_id] = group
        return group

    @staticmethod
    def _check_txn_commit(group: Group, generation_id: int, member_id: str, group_instance_id: str | None) -> ErrorCode:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.static_member_fenced(member_id, group_instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id and member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id >= 0 and generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def _check_transaction(
        self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int, fenced: ErrorCode
    ) -> ErrorCode:
        transactions = self.transactions
        assert transactions is not None, "the node wires the transaction coordinator before serving"
        if not transactions.coordinates(transactional_id):
            # On a cluster the transaction lives on another broker, which added this group's partition to it before
            # the client was told to send this (AddOffsetsToTxn); until brokers ask each other, it is not re-checked.
            return ErrorCode.NONE
        metadata = transactions.get(transactional_id)
        if metadata is None or metadata.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING
        if producer_epoch != metadata.producer_epoch:
            return fenced
        partition = (CONSUMER_OFFSETS_TOPIC, self.group_log.partition_for(group_id))
        if metadata.state != TxnState.ONGOING or partition not in metadata.partitions:
            return ErrorCode.INVALID_TXN_STATE
        return ErrorCode.NONE

    # OffsetFetch -----------------------------------------------------------------------------------------------

    def fetch_offsets(
        self, group_id: str, partitions: list[TopicPartition] | None, require_stable: bool
    ) -> tuple[ErrorCode, list[tuple[TopicPartition, int, int, str, ErrorCode]]]:
        """Kafka's handleFetchOffsets: (error, [(partition, offset, leader epoch, metadata, error)]); ``None``
        partitions means every partition with a committed offset."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        if (error := self.status(group_id)) != ErrorCode.NONE:
            return error, []
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.NONE, [(tp, INVALID_OFFSET, -1, NO_METADATA, ErrorCode.NONE) for tp in partitions or []]
        wanted = sorted(group.offsets) if partitions is None else partitions
        result = []
        for tp in wanted:
            if require_stable and group.has_pending_txn_offset(*tp):
                result.append((tp, INVALID_OFFSET, -1, NO_METADATA, ErrorCode.UNSTABLE_OFFSET_COMMIT))
                continue
            committed = group.offsets.get(tp)
            if committed is None:
                result.append((tp, INVALID_OFFSET, -1, NO_METADATA, ErrorCode.NONE))
            else:
                v = committed.value
                result.append((tp, v.offset, v.leader_epoch, v.metadata, ErrorCode.NONE))
        return ErrorCode.NONE, result

    # Expiration / deletion -------------------------------------------------------------------------------------

    async def _write_tombstones(
        self, group: Group, partitions: list[TopicPartition], *, group_tombstone: bool
    ) -> ErrorCode:
        """Append (durably) a tombstone per partition, and one for the group itself when asked; only then do the
        partitions lose their committed and pending transactional offsets, as the log replays it."""
        records: list[tuple[bytes, bytes | None]] = [
            (encode_offset_key(group.group_id, t, p), None) for t, p in partitions
        ]
        if group_tombstone:
            records.append((encode_group_key(group.group_id), None))
        if not records:
            return ErrorCode.NONE
        error, _ = await self.group_log.append(group.group_id, records)
        if error == ErrorCode.NONE:
            group.remove_offsets(partitions)
        return error

    async def delete_offsets(
        self, group_id: str, partitions: list[TopicPartition]
    ) -> tuple[ErrorCode, dict[TopicPartition, ErrorCode]]:
        """Kafka's handleDeleteOffsets (KIP-496): (group error, error per partition; none when the group errs).

        An Empty group loses the offsets of every partition asked for. A rebalancing or Stable ``consumer`` group
        keeps those of topics its members subscribe to (GROUP_SUBSCRIBED_TO_TOPIC) and loses the others; any
        other active group refuses (NON_EMPTY_GROUP). A partition's tombstone is written when it has a committed
        or pending transactional offset (Kafka 4's rule) and is durable before the answer; an Empty group left
        without offsets is removed with a group tombstone, as Kafka 3's cleanupGroupMetadata does."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, {}
        async with self._locks(group_id):
            if (error := self.status(group_id)) != ErrorCode.NONE:
                return error, {}
            group = self._groups.get(group_id)
            if group is None or group.is_(GroupState.DEAD):
                return ErrorCode.GROUP_ID_NOT_FOUND, {}
            if self._kip848.is_consumer_group(group_id):  # KIP-848: its members' topics stay
                subscribed = self._kip848.subscribed_topics(group_id)
                refused: set[TopicPartition] = {tp for tp in partitions if tp[0] in subscribed}
            elif group.is_(GroupState.EMPTY):
                refused = set()
            elif group.protocol_type == CONSUMER_PROTOCOL_TYPE:
                refused = {tp for tp in partitions if group.is_subscribed_to(tp[0])}
            else:
                return ErrorCode.NON_EMPTY_GROUP, {}
            eligible = [tp for tp in partitions if tp not in refused]
            error, held, gone = await self._remove_offsets(group, eligible, remove_empty_group=bool(eligible))
            if error != ErrorCode.NONE:
                return error, {}
            log.info("offsets_deleted", group_id=group_id, partitions=len(held), group_removed=gone)
            return ErrorCode.NONE, {
                tp: ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC if tp in refused else ErrorCode.NONE for tp in partitions
            }

    async def _run_offset_expiration(self) -> None:
        interval_s = self._config.get_int("offsets.retention.check.interval.ms") / 1000
        while True:
            await trio.sleep(interval_s)
            await self.expire_offsets(self._clock_ms())

    async def expire_offsets(self, now: int) -> None:
        """Kafka's cleanupGroupMetadata: every group loses the offsets ``Group.expired_offsets`` names (tombstones),
        and an Empty group left with no offsets and no open transaction is removed. A failed append leaves that
        group as it was, for the next pass."""
        retention_ms = self._config.get_int("offsets.retention.minutes") * 60_000
        for i, (group_id, group) in enumerate(list(self._groups.items())):
            if i % GROUPS_PER_CHECKPOINT == GROUPS_PER_CHECKPOINT - 1:
                await trio.lowlevel.checkpoint()
            if not self._expired(group, now, retention_ms) and not _removable(group):
                continue
            async with self._locks(group_id):
                if self._groups.get(group_id) is not group:
                    continue
                expired = self._expired(group, now, retention_ms)
                error, _, gone = await self._remove_offsets(group, expired, remove_empty_group=True)
                if error != ErrorCode.NONE:
                    log.warning("offset_expiration_failed", group_id=group_id, error=error.name)
                elif expired or gone:
                    log.info("offsets_expired", group_id=group_id, partitions=len(expired), group_removed=gone)

    def _expired(self, group: Group, now: int, retention_ms: int) -> list[TopicPartition]:
        """``Group.expired_offsets``; a KIP-848 group's offsets sit in an entry without protocol type (expiring from
        their commit), less those of the topics its members subscribe to, as Kafka's ConsumerGroup expires them."""
        expired = group.expired_offsets(now, retention_ms)
        if expired and self._kip848.is_consumer_group(group.group_id):
            subscribed = self._kip848.subscribed_topics(group.group_id)
            expired = [tp for tp in expired if tp[0] not in subscribed]
        return expired

    async def delete_partition_offsets(self, deleted: Callable[[str, int], bool]) -> ErrorCode:
        """Kafka's onPartitionsDeleted: every group loses its committed and pending transactional offsets of the
        partitions ``deleted`` selects (a tombstone each, durable), and an Empty group left with no offsets and no
        open transaction is removed with them (group tombstone), as Kafka 3's cleanupGroupMetadata removes it.
        Offsets being committed when this starts are waited for (the group's lock) and removed too; the caller
        refuses new ones. Returns the first append error: the groups handled before it lost their offsets, the
        others kept theirs."""
        for i, (group_id, group) in enumerate(list(self._groups.items())):
            if i % GROUPS_PER_CHECKPOINT == GROUPS_PER_CHECKPOINT - 1:
                await trio.lowlevel.checkpoint()
            if not any(deleted(*tp) for tp in group.partitions_with_offsets()):
                continue
            async with self._locks(group_id):
                if self._groups.get(group_id) is not group:
                    continue
                held = [tp for tp in group.partitions_with_offsets() if deleted(*tp)]
                if not held:
                    continue
                error, _, gone = await self._remove_offsets(group, held, remove_empty_group=True)
                if error != ErrorCode.NONE:
                    log.error("deleted_offsets_not_removed", group_id=group_id, error=error.name)
                    return error
                log.info("deleted_offsets_removed", group_id=group_id, partitions=len(held), group_removed=gone)
        return ErrorCode.NONE

    async def _remove_offsets(
        self, group: Group, partitions: list[TopicPartition], *, remove_empty_group: bool
    ) -> tuple[ErrorCode, list[TopicPartition], bool]:
        """Tombstone those of ``partitions`` holding a committed or pending transactional offset (Kafka 4's rule)
        and, when ``remove_empty_group``, remove an Empty group left with no offsets and no open transaction (Kafka
        3's hasOffsets) with a group tombstone in the same batch. The caller holds the group's lock. Returns (error,
        the partitions tombstoned, whether the group was removed); on error nothing changed in memory."""
        held = [tp for tp in partitions if tp in group.offsets or group.has_pending_txn_offset(*tp)]
        left = set(group.offsets).difference(held)
        gone = remove_empty_group and _removable(group, left)
        error = await self._write_tombstones(group, held, group_tombstone=gone)
        if error == ErrorCode.NONE and gone:
            group.apply(GroupEvent.REMOVED, self._clock_ms())
            del self._groups[group.group_id]
        return error, held, gone


def _removable(group: Group, offsets_left: set[TopicPartition] | None = None) -> bool:
    """Kafka 3's condition for removing a group: Empty, with no offsets left (``offsets_left``, else its current
    ones) and no open transaction."""
    left = group.offsets if offsets_left is None else offsets_left
    return group.is_(GroupState.EMPTY) and not left and not group.pending_txn_offsets
