"""The classic group coordinator: Kafka's GroupCoordinator for JoinGroup / SyncGroup / Heartbeat / LeaveGroup on one
node (offsets: see ``offsets.py``).

Guarantees:
- Requests for one group are serialized by a per-group lock (``KeyedLocks``: it exists only while held or awaited,
  so requests naming groups that do not exist leave nothing behind); a JoinGroup / SyncGroup that must wait for the
  rebalance releases the lock and waits for its Reply. A Heartbeat / SyncGroup / LeaveGroup for a group that does
  not exist is answered without taking a lock.
- State changes follow Kafka's classic protocol, as the table in ``group.state`` has them: Empty ->
  PreparingRebalance -> CompletingRebalance -> Stable, back to PreparingRebalance on joins/leaves/expiries, Empty
  when the last member goes, Dead when deleted; the coordinator reports events, the table picks the state.
- The group's metadata (generation, protocol, leader, members with assignments) is fsynced in
  ``__consumer_offsets`` before the leader's assignment is handed out, and whenever a rebalance leaves it Empty.
- Timers (session expiry, join phase end, initial rebalance delay, MEMBER_ID_REQUIRED members) run in one task of
  the coordinator's nursery (``run``), which sleeps until the earliest deadline of a ``DeadlineHeap`` holding at most
  one entry per group with a deadline: every change that can bring a group's deadline forward schedules it (under
  the group's lock), a heartbeat only pushes deadlines back and schedules nothing, and a group whose entry comes due
  early is checked and scheduled again. So an idle broker costs nothing per group, and a due group costs
  O(its members).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog
import trio
from oncelog.broker.coordinator_partitions import CoordinatorPartitions
from oncelog.broker.deadlines import DeadlineHeap
from oncelog.broker.group.listing import listed_groups
from oncelog.broker.group.metadata import Group, Member, Reply
from oncelog.broker.group.offsets import ConsumerGroupLookup, OffsetsMixin, TransactionLookup
from oncelog.broker.group.offsets_log import GroupLog
from oncelog.broker.group.state import GroupEvent, GroupState
from oncelog.broker.keyed_locks import KeyedLocks
from oncelog.broker.metadata import CONSUMER_OFFSETS_TOPIC
from oncelog.protocol import ErrorCode
from oncelog.protocol.internal.group_log import GroupValue, MemberValue, encode_group_key, encode_group_value

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from oncelog.broker.config import BrokerConfig
    from oncelog.broker.metadata import MetadataStore
    from oncelog.broker.replica_manager import ReplicaManager
    from oncelog.storage.log_manager import LogManager

log = structlog.get_logger(__name__)

#: Kafka's GroupCoordinator.NewMemberJoinTimeoutMs: a new member that stops waiting for its JoinGroup answer
#: (e.g. disconnected) is dropped after this (KIP-394).
NEW_MEMBER_JOIN_TIMEOUT_MS = 300000
#: Kafka's Group.GroupType name of the groups of the JoinGroup/SyncGroup protocol (ListGroups v5).
CLASSIC_GROUP_TYPE = "classic"
#: Due groups the timer task expires between two scheduler checkpoints (a burst of expiries never stalls the loop).
EXPIRIES_PER_CHECKPOINT = 64


@dataclass(frozen=True)
class JoinRequest:
    """A JoinGroup request, version-independent (v0: rebalance timeout = session timeout)."""

    group_id: str
    member_id: str
    group_instance_id: str | None
    require_known_member_id: bool
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]


def join_error(error: ErrorCode, member_id: str = "") -> dict:
    return {
        "error_code": error,
        "generation_id": -1,
        "protocol_type": None,
        "protocol_name": None,
        "leader": "",
        "member_id": member_id,
        "members": [],
    }


class GroupCoordinator(OffsetsMixin):
    """Owns every group of this node and their offsets."""

    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataStore,
        logs: LogManager,
        replicas: ReplicaManager,
        *,
        clock_ms: Callable[[], int],
        ensure_offsets_topic: Callable[[], Awaitable[None]],
        deleting_topics: set[str],
    ) -> None:
        """``config``: the broker's settings read here (none of them dynamic); ``metadata``: which partitions exist;
        ``clock_ms``: wall-clock milliseconds (state timestamps, offset expiry); ``ensure_offsets_topic``: creates
        ``__consumer_offsets`` on first use; ``deleting_topics``: the topics being deleted (offsets of them are
        refused). The node sets ``transactions`` once the transaction coordinator exists (it writes the markers this
        coordinator listens to, so it is built after it)."""
        self._config = config
        self._metadata = metadata
        self._clock_ms = clock_ms
        self._deleting_topics = deleting_topics
        self.transactions: TransactionLookup | None = None
        #: The KIP-848 groups, which keep their offsets here (set by the node, built after this coordinator).
        self.consumer_groups: ConsumerGroupLookup | None = None
        self.group_log = GroupLog(
            replicas,
            logs,
            num_partitions=config.get_int("offsets.topic.num.partitions"),
            ensure_topic=ensure_offsets_topic,
        )
        self._initial_delay_ms = config.get_int("group.initial.rebalance.delay.ms")
        self._min_session_ms = config.get_int("group.min.session.timeout.ms")
        self._max_session_ms = config.get_int("group.max.session.timeout.ms")
        self._max_size = config.get_int("group.max.size")
        self._groups: dict[str, Group] = {}
        self._locks: KeyedLocks[str] = KeyedLocks()
        #: Group id -> when its timers must be looked at (trio.current_time()); see ``_schedule``.
        self._timers: DeadlineHeap[str] = DeadlineHeap()
        #: What the timer task sleeps until (-inf while it works): an earlier deadline wakes it.
        self._timer_sleep_until = -math.inf
        self._wakeup = trio.Event()
        #: (offsets partition, producer id) -> groups holding pending transactional offsets of that producer.
        self._pending_txn: dict[tuple[int, int], set[str]] = {}
        self._txn_appends: dict[tuple[int, int], list[list[bool]]] = {}
        self._running = False
        #: The ``__consumer_offsets`` partitions whose groups this broker coordinates.
        self.partitions = CoordinatorPartitions(
            CONSUMER_OFFSETS_TOPIC,
            replicas,
            load=self.group_log.load_steps,
            install=self._install,
            unload=self._unload,
        )

    def load(self) -> None:
        """Rebuild the groups of the ``__consumer_offsets`` partitions this broker leads without an applied state
        (blocking; before serving): every partition on the single node, none on a cluster member, which loads each
        partition when it comes to lead it."""
        self.partitions.load_unassigned(self.group_log.num_partitions)
        log.info("groups_loaded", groups=len(self._groups), pending_transactional=len(self._pending_txn))

    def status(self, group_id: str) -> ErrorCode:
        """NONE when this broker coordinates the group now, COORDINATOR_LOAD_IN_PROGRESS while its partition is
        being loaded here, else NOT_COORDINATOR."""
        return self.partitions.status(self.group_log.partition_for(group_id))

    def _unload(self, partition: int) -> None:
        """This broker no longer coordinates the partition's groups: drop them (members waiting for a JoinGroup or
        SyncGroup answer get NOT_COORDINATOR and look for the new coordinator) and their pending offsets."""
        for group_id in [g for g in self._groups if self.group_log.partition_for(g) == partition]:
            group = self._groups.pop(group_id)
            self._timers.cancel(group_id)
            for member in group.members.values():
                member.answer_join(join_error(ErrorCode.NOT_COORDINATOR, member.member_id))
                member.answer_sync(ErrorCode.NOT_COORDINATOR, b"")
        for key in [k for k in self._pending_txn if k[0] == partition]:
            del self._pending_txn[key]
        self._kip848.unload(lambda group_id: self.group_log.partition_for(group_id) == partition)

    # Lifecycle -------------------------------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Run the group timers and offset expiration until cancelled. Loaded members' sessions start now; offsets
        of partitions that do not exist are removed before this reports started (``remove_orphaned_offsets``)."""
        now = trio.current_time()
        for group in self._groups.values():
            for member in group.members.values():
                member.last_heartbeat_s = now
            self._schedule(group)
        self._running = True
        await self.remove_orphaned_offsets()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._run_timers)
            nursery.start_soon(self._run_offset_expiration)
            await nursery.start(self.partitions.run)
            task_status.started()

    def get(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def all(self) -> list[Group]:
        return list(self._groups.values())

    def _schedule(self, group: Group) -> None:
        """Make sure the timer task looks at ``group`` by its next deadline (callers hold the group's lock and call
        this after any change that may bring that deadline forward). O(members of the group)."""
        deadline = self._group_deadline(group)
        if self._timers.schedule_earlier(group.group_id, deadline) and deadline < self._timer_sleep_until:
            self._wakeup.set()

    # JoinGroup -------------------------------------------------------------------------------------------------

    async def join_group(self, request: JoinRequest) -> dict:
        """Kafka's handleJoinGroup; returns the JoinGroup response fields (waiting for the join phase to end)."""
        if not request.group_id:
            return join_error(ErrorCode.INVALID_GROUP_ID, request.member_id)
        if not self._min_session_ms <= request.session_timeout_ms <= self._max_session_ms:
            return join_error(ErrorCode.INVALID_SESSION_TIMEOUT, request.member_id)
        await self.group_log.topic_made()  # if not, ``status`` answers NOT_COORDINATOR
        async with self._locks(request.group_id):
            if (error := self.status(request.group_id)) != ErrorCode.NONE:
                return join_error(error, request.member_id)
            group = self._groups.get(request.group_id)
            if group is None:
                if request.member_id:
                    return join_error(ErrorCode.UNKNOWN_MEMBER_ID, request.member_id)
                group = Group(request.group_id, state_timestamp_ms=self._clock_ms())
                self._groups[request.group_id] = group
            known = request.member_id in group.members or request.member_id in group.pending_members
            if not known and len(group.members) + len(group.pending_members) >= self._max_size:
                return join_error(ErrorCode.GROUP_MAX_SIZE_REACHED, request.member_id)
            try:
                if not request.member_id:
                    outcome = await self._join_new_member(group, request)
                else:
                    outcome = await self._join_known_member(group, request)
            finally:
                self._schedule(group)
        if isinstance(outcome, Reply):
            result = await outcome.wait()
            assert isinstance(result, dict)
            return result
        return outcome

    async def _join_new_member(self, group: Group, request: JoinRequest) -> dict | Reply:
        if group.is_(GroupState.DEAD):
            return join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE)
        if not group.supports_protocols(request.protocol_type, request.protocols):
            return join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
        member_id = f"{request.client_id}-{uuid.uuid4()}"
        instance_id = request.group_instance_id
        if instance_id is not None:
            old_id = group.static_members.get(instance_id)
            if old_id is not None:
                return await self._rejoin_static_member(group, instance_id, old_id, member_id, request)
            return await self._add_member_and_rebalance(group, member_id, request)
        if request.require_known_member_id:
            # KIP-394: hand out the id first; the member is counted only once it joins with it.
            session_s = request.session_timeout_ms / 1000
            group.pending_members[member_id] = trio.current_time() + session_s
            return join_error(ErrorCode.MEMBER_ID_REQUIRED, member_id)
        return await self._add_member_and_rebalance(group, member_id, request)

    async def _join_known_member(self, group: Group, request: JoinRequest) -> dict | Reply:
        member_id = request.member_id
        if group.is_(GroupState.DEAD):
            return join_error(ErrorCode.COORDINATOR_NOT_AVAILABLE, member_id)
        if not group.supports_protocols(request.protocol_type, request.protocols):
            return join_error(ErrorCode.INCONSISTENT_GROUP_PROTOCOL, member_id)
        if member_id in group.pending_members:
            return await self._add_member_and_rebalance(group, member_id, request)
        if group.static_member_fenced(member_id, request.group_instance_id):
            return join_error(ErrorCode.FENCED_INSTANCE_ID, member_id)
        member = group.members.get(member_id)
        if member is None or group.state in (GroupState.EMPTY, GroupState.DEAD):
            return join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id)
        if group.is_(GroupState.PREPARING_REBALANCE):
            return await self._update_member_and_rebalance(group, member, request)
        if group.is_(GroupState.COMPLETING_REBALANCE):
            if member.matches(request.protocols):
                # The member lost the JoinGroup answer: give it the current generation again.
                member.last_heartbeat_s = trio.current_time()
                return self._join_result(group, member)
            return await self._update_member_and_rebalance(group, member, request)
        # Stable
        if member_id == group.leader_id or not member.matches(request.protocols):
            return await self._update_member_and_rebalance(group, member, request)
        member.last_heartbeat_s = trio.current_time()
        return self._join_result(group, member)

    def _join_result(self, group: Group, member: Member, leader_id: str | None = None) -> dict:
        leader = leader_id if leader_id is not None else group.leader_id
        members = []
        if member.member_id == leader and group.protocol_name is not None:
            members = [
                {
                    "member_id": m.member_id,
                    "group_instance_id": m.group_instance_id,
                    "metadata": m.metadata_for(group.protocol_name),
                }
                for m in group.members.values()
            ]
        return {
            "error_code": ErrorCode.NONE,
            "generation_id": group.generation_id,
            "protocol_type": group.protocol_type,
            "protocol_name": group.protocol_name,
            "leader": leader or "",
            "member_id": member.member_id,
            "members": members,
        }

    async def _add_member_and_rebalance(self, group: Group, member_id: str, request: JoinRequest) -> Reply:
        member = Member(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=list(request.protocols),
            last_heartbeat_s=trio.current_time(),
            is_new=True,
        )
        reply = Reply()
        member.join_reply = reply
        if group.is_(GroupState.PREPARING_REBALANCE) and group.initial_delay_remaining_ms is not None:
            group.new_member_added = True
        group.add(member)
        await self._maybe_prepare_rebalance(group, f"member {member_id} joined")
        await self._maybe_complete_join(group)
        return reply

    async def _update_member_and_rebalance(self, group: Group, member: Member, request: JoinRequest) -> Reply:
        if member.join_reply is not None:
            # A second JoinGroup of the same member: the first one will not be answered normally any more.
            member.answer_join(join_error(ErrorCode.REBALANCE_IN_PROGRESS, member.member_id))
        member.protocols = list(request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.last_heartbeat_s = trio.current_time()
        reply = Reply()
        member.join_reply = reply
        await self._maybe_prepare_rebalance(group, f"member {member.member_id} rejoined")
        await self._maybe_complete_join(group)
        return reply

    async def _rejoin_static_member(
        self, group: Group, instance_id: str, old_id: str, new_id: str, request: JoinRequest
    ) -> dict | Reply:
        """KIP-345: a static member rejoining with an unknown member id takes over its old membership; a Stable
        group does not rebalance unless the member's protocols change the group's choice."""
        member = group.members[old_id]
        fenced = join_error(ErrorCode.FENCED_INSTANCE_ID, old_id)
        member.answer_join(fenced)
        member.answer_sync(ErrorCode.FENCED_INSTANCE_ID, b"")
        old = (member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms)
        current_leader = group.leader_id
        group.replace_static_member(instance_id, old_id, new_id)
        member.protocols = list(request.protocols)
        member.rebalance_timeout_ms = request.rebalance_timeout_ms
        member.session_timeout_ms = request.session_timeout_ms
        member.client_id = request.client_id
        member.client_host = request.client_host
        member.last_heartbeat_s = trio.current_time()
        if group.is_(GroupState.STABLE):
            if group.select_protocol() == group.protocol_name:
                error = await self._store_group(group)
                if error != ErrorCode.NONE:
                    group.replace_static_member(instance_id, new_id, old_id)
                    member.protocols, member.rebalance_timeout_ms, member.session_timeout_ms = old
                    return join_error(error)
                # The old leader id is returned so that the rejoined member does not run a pointless assignment.
                log.info("static_member_rejoined", group_id=group.group_id, instance_id=instance_id)
                return self._join_result(group, member, leader_id=current_leader)
            reply = Reply()
            member.join_reply = reply
            await self._maybe_prepare_rebalance(group, f"static member {instance_id} changed protocols")
            return reply
        reply = Reply()
        member.join_reply = reply
        if group.is_(GroupState.COMPLETING_REBALANCE):
            await self._prepare_rebalance(group, f"static member {instance_id} rejoined during sync")
        await self._maybe_complete_join(group)
        return reply

    # Rebalance mechanics ---------------------------------------------------------------------------------------

    async def _maybe_prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.can_rebalance:
            await self._prepare_rebalance(group, reason)

    async def _prepare_rebalance(self, group: Group, reason: str) -> None:
        if group.is_(GroupState.COMPLETING_REBALANCE):
            self._reset_assignments(group, ErrorCode.REBALANCE_IN_PROGRESS)
        now = trio.current_time()
        if group.is_(GroupState.EMPTY):
            delay_ms = self._initial_delay_ms
            group.initial_delay_remaining_ms = max(group.rebalance_timeout_ms - delay_ms, 0)
            group.new_member_added = False
            group.join_deadline_s = now + delay_ms / 1000
        else:
            group.initial_delay_remaining_ms = None
            group.join_deadline_s = now + group.rebalance_timeout_ms / 1000
        group.apply(GroupEvent.PREPARE_REBALANCE, self._clock_ms())
        log.info("rebalance_started", group_id=group.group_id, generation=group.generation_id, reason=reason)

    def _reset_assignments(self, group: Group, error: ErrorCode) -> None:
        for member in group.members.values():
            member.assignment = b""
            member.answer_sync(error, b"")

    async def _maybe_complete_join(self, group: Group) -> None:
        if group.is_(GroupState.PREPARING_REBALANCE) and group.initial_delay_remaining_ms is None and group.all_joined:
            await self._complete_join(group)

    async def _complete_join(self, group: Group) -> None:
        """Kafka's onCompleteJoin: drop members that did not rejoin, start the next generation, answer joins."""
        for member in [m for m in group.members.values() if not m.awaiting_join]:
            group.remove(member.member_id)
            member.answer_sync(ErrorCode.UNKNOWN_MEMBER_ID, b"")
            log.info("member_removed", group_id=group.group_id, member_id=member.member_id, reason="did not rejoin")
        group.join_deadline_s = None
        group.initial_delay_remaining_ms = None
        if group.is_(GroupState.DEAD):
            return
        group.generation_id += 1
        if not group.members:
            group.protocol_name = None
            group.refresh_subscribed_topics()
            group.apply(GroupEvent.JOIN_COMPLETED_EMPTY, self._clock_ms())
            error = await self._store_group(group)
            if error != ErrorCode.NONE:
                log.warning("group_store_failed", group_id=group.group_id, error=error.name)
            log.info("group_empty", group_id=group.group_id, generation=group.generation_id)
            return
        group.protocol_name = group.select_protocol()
        group.refresh_subscribed_topics()
        group.apply(GroupEvent.JOIN_COMPLETED, self._clock_ms())
        now = trio.current_time()
        for member in list(group.members.values()):
            member.answer_join(self._join_result(group, member))
            member.last_heartbeat_s = now
        log.info(
            "join_completed",
            group_id=group.group_id,
            generation=group.generation_id,
            protocol=group.protocol_name,
            members=len(group.members),
        )

    async def _remove_member_and_update(self, group: Group, member_id: str, reason: str) -> None:
        member = group.remove(member_id)
        if member is None:
            return
        log.info("member_removed", group_id=group.group_id, member_id=member_id, reason=reason)
        member.answer_join(join_error(ErrorCode.UNKNOWN_MEMBER_ID, member_id))
        member.answer_sync(ErrorCode.UNKNOWN_MEMBER_ID, b"")
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            await self._prepare_rebalance(group, reason)
        await self._maybe_complete_join(group)

    async def _store_group(self, group: Group, assignments: dict[str, bytes] | None = None) -> ErrorCode:
        """Persist the group's metadata (with ``assignments``, else the members' current ones)."""
        protocol = group.protocol_name
        value = GroupValue(
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=protocol,
            leader=group.leader_id if group.members else None,
            current_state_timestamp_ms=group.state_timestamp_ms,
            members=tuple(
                MemberValue(
                    member_id=m.member_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    session_timeout_ms=m.session_timeout_ms,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    subscription=m.metadata_for(protocol) if protocol is not None else b"",
                    assignment=(assignments or {}).get(m.member_id, m.assignment),
                    group_instance_id=m.group_instance_id,
                )
                for m in group.members.values()
            ),
        )
        record = (encode_group_key(group.group_id), encode_group_value(value))
        error, _ = await self.group_log.append(group.group_id, [record])
        return error

    # SyncGroup -------------------------------------------------------------------------------------------------

    async def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
    ) -> tuple[ErrorCode, bytes, str | None, str | None]:
        """Kafka's handleSyncGroup: (error, assignment, protocol type, protocol name)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, b"", None, None
        if (error := self.status(group_id)) != ErrorCode.NONE:
            return error, b"", None, None
        if group_id not in self._groups:
            return ErrorCode.UNKNOWN_MEMBER_ID, b"", None, None
        async with self._locks(group_id):
            group = self._groups.get(group_id)
            if group is None:
                return ErrorCode.UNKNOWN_MEMBER_ID, b"", None, None
            error = self._check_member(group, member_id, group_instance_id, generation_id)
            if error == ErrorCode.NONE and (
                (protocol_type is not None and protocol_type != group.protocol_type)
                or (protocol_name is not None and protocol_name != group.protocol_name)
            ):
                error = ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            if error != ErrorCode.NONE:
                return error, b"", None, None
            kind, name = group.protocol_type, group.protocol_name
            member = group.members[member_id]
            if group.is_(GroupState.EMPTY):
                return ErrorCode.UNKNOWN_MEMBER_ID, b"", None, None
            if group.is_(GroupState.PREPARING_REBALANCE):
                return ErrorCode.REBALANCE_IN_PROGRESS, b"", None, None
            member.last_heartbeat_s = trio.current_time()
            if group.is_(GroupState.STABLE):
                return ErrorCode.NONE, member.assignment, kind, name
            # CompletingRebalance: wait for the leader's assignment.
            reply = Reply()
            member.answer_sync(ErrorCode.REBALANCE_IN_PROGRESS, b"")
            member.sync_reply = reply
            if member_id == group.leader_id:
                full = {m: assignments.get(m, b"") for m in group.members}
                store_error = await self._store_group(group, full)
                if store_error != ErrorCode.NONE:
                    self._reset_assignments(group, store_error)
                    await self._maybe_prepare_rebalance(group, "storing the assignment failed")
                else:
                    for m in group.members.values():
                        m.assignment = full[m.member_id]
                        m.answer_sync(ErrorCode.NONE, m.assignment)
                    group.apply(GroupEvent.ASSIGNMENT_STORED, self._clock_ms())
                    log.info("group_stable", group_id=group_id, generation=group.generation_id)
            self._schedule(group)
        error, assignment = await reply.wait()  # type: ignore[misc]
        return ErrorCode(error), assignment, kind, name

    def _check_member(self, group: Group, member_id: str, instance_id: str | None, generation_id: int) -> ErrorCode:
        if group.is_(GroupState.DEAD):
            return ErrorCode.COORDINATOR_NOT_AVAILABLE
        if group.static_member_fenced(member_id, instance_id):
            return ErrorCode.FENCED_INSTANCE_ID
        if member_id not in group.members:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if generation_id != group.generation_id:
            return ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    # Heartbeat / LeaveGroup ------------------------------------------------------------------------------------

    async def heartbeat(
        self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        """Kafka's handleHeartbeat."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        if (error := self.status(group_id)) != ErrorCode.NONE:
            return error
        if group_id not in self._groups:
            return ErrorCode.UNKNOWN_MEMBER_ID  # Kafka's answer for a group it does not have; nothing is kept
        async with self._locks(group_id):
            group = self._groups.get(group_id)
            if group is None:
                return ErrorCode.UNKNOWN_MEMBER_ID
            error = self._check_member(group, member_id, group_instance_id, generation_id)
            if error != ErrorCode.NONE:
                return error
            if group.is_(GroupState.EMPTY):
                return ErrorCode.UNKNOWN_MEMBER_ID
            # Only pushes this member's deadline back: nothing to schedule (a due entry is checked and rescheduled).
            group.members[member_id].last_heartbeat_s = trio.current_time()
            if group.is_(GroupState.PREPARING_REBALANCE):
                return ErrorCode.REBALANCE_IN_PROGRESS
            return ErrorCode.NONE

    async def leave_group(
        self, group_id: str, leaving: list[tuple[str, str | None]]
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        """Kafka's handleLeaveGroup: a top-level error and one per (member id, group instance id)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID, []
        if (error := self.status(group_id)) != ErrorCode.NONE:
            return error, []
        if group_id not in self._groups:
            return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
        async with self._locks(group_id):
            group = self._groups.get(group_id)
            if group is None:
                return ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID] * len(leaving)
            if group.is_(GroupState.DEAD):
                return ErrorCode.COORDINATOR_NOT_AVAILABLE, []
            try:
                return ErrorCode.NONE, await self._leave(group, leaving)
            finally:
                self._schedule(group)

    async def _leave(self, group: Group, leaving: list[tuple[str, str | None]]) -> list[ErrorCode]:
        """The members leave (the caller holds the group's lock); one error per member."""
        errors = []
        for member_id, instance_id in leaving:
            if instance_id is not None:
                known = group.static_members.get(instance_id)
                if known is None:
                    errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                    continue
                if member_id and member_id != known:
                    errors.append(ErrorCode.FENCED_INSTANCE_ID)
                    continue
                member_id = known
            elif member_id in group.pending_members:
                del group.pending_members[member_id]
                errors.append(ErrorCode.NONE)
                await self._maybe_complete_join(group)
                continue
            elif member_id not in group.members:
                errors.append(ErrorCode.UNKNOWN_MEMBER_ID)
                continue
            await self._remove_member_and_update(group, member_id, "left the group")
            errors.append(ErrorCode.NONE)
        return errors

    # Timers ----------------------------------------------------------------------------------------------------

    def _member_deadline(self, member: Member) -> float:
        if member.awaiting_join:
            return member.last_heartbeat_s + NEW_MEMBER_JOIN_TIMEOUT_MS / 1000 if member.is_new else math.inf
        if member.awaiting_sync:
            return math.inf
        return member.last_heartbeat_s + member.session_timeout_ms / 1000

    def _group_deadline(self, group: Group) -> float:
        deadline = group.join_deadline_s if group.join_deadline_s is not None else math.inf
        for expiry in group.pending_members.values():
            deadline = min(deadline, expiry)
        for member in group.members.values():
            deadline = min(deadline, self._member_deadline(member))
        return deadline

    async def _run_timers(self) -> None:
        """Sleep until the earliest scheduled deadline (or a wake-up for an earlier one), then expire what is due."""
        while True:
            self._timer_sleep_until = self._timers.next_deadline()
            with trio.move_on_at(self._timer_sleep_until):
                await self._wakeup.wait()
            self._timer_sleep_until = -math.inf
            self._wakeup = trio.Event()
            expired = 0
            while (group_id := self._timers.pop_due(trio.current_time())) is not None:
                group = self._groups.get(group_id)
                if group is None:
                    continue
                async with self._locks(group_id):
                    if self._groups.get(group_id) is group:
                        await self._expire(group, trio.current_time())
                        self._schedule(group)
                expired += 1
                if expired % EXPIRIES_PER_CHECKPOINT == 0:
                    await trio.lowlevel.checkpoint()

    async def _expire(self, group: Group, now: float) -> None:
        for member_id, expiry in list(group.pending_members.items()):
            if expiry <= now:
                del group.pending_members[member_id]
                await self._maybe_complete_join(group)
        for member in list(group.members.values()):
            if self._member_deadline(member) <= now and group.members.get(member.member_id) is member:
                await self._remove_member_and_update(group, member.member_id, "session timeout expired")
        if group.join_deadline_s is not None and group.join_deadline_s <= now:
            remaining = group.initial_delay_remaining_ms
            if remaining is not None and group.new_member_added and remaining > 0:
                delay_ms = min(self._initial_delay_ms, remaining)
                group.new_member_added = False
                group.initial_delay_remaining_ms = remaining - delay_ms
                group.join_deadline_s = now + delay_ms / 1000
            else:
                await self._complete_join(group)

    # DescribeGroups / ListGroups / DeleteGroups ----------------------------------------------------------------

    def describe(self, group_id: str) -> dict:
        """One DescribeGroups entry; an unknown group is reported Dead, as Kafka does."""
        group = self._groups.get(group_id)
        if not group_id:
            return _described(group_id, ErrorCode.INVALID_GROUP_ID, GroupState.DEAD.value, "", "", [])
        if (error := self.status(group_id)) != ErrorCode.NONE:
            return _described(group_id, error, GroupState.DEAD.value, "", "", [])
        if group is None:
            return _described(group_id, ErrorCode.NONE, GroupState.DEAD.value, "", "", [])
        stable = group.is_(GroupState.STABLE)
        members = [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "member_metadata": m.metadata_for(group.protocol_name) if stable and group.protocol_name else b"",
                "member_assignment": m.assignment if stable else b"",
            }
            for m in group.members.values()
        ]
        protocol = (group.protocol_name or "") if stable else ""
        return _described(group_id, ErrorCode.NONE, group.state.value, group.protocol_type or "", protocol, members)

    def list_groups(self, states: Iterable[str], types: Iterable[str] = ()) -> list[dict]:
        """ListGroups' entries of the live groups (``listing.listed_groups``): every group here is a classic one."""
        live = (
            (g.group_id, g.protocol_type or "", g.state.value)
            for g in self._groups.values()
            if not g.is_(GroupState.DEAD)
        )
        return listed_groups(live, states, types, CLASSIC_GROUP_TYPE)

    async def delete_group(self, group_id: str) -> ErrorCode:
        """Kafka's deleteGroups for one group: only an Empty group goes (tombstones for it and its offsets)."""
        if not group_id:
            return ErrorCode.INVALID_GROUP_ID
        async with self._locks(group_id):
            if (error := self.status(group_id)) != ErrorCode.NONE:
                return error
            group = self._groups.get(group_id)
            if group is None or group.is_(GroupState.DEAD):
                return ErrorCode.GROUP_ID_NOT_FOUND
            if not group.is_(GroupState.EMPTY):
                return ErrorCode.NON_EMPTY_GROUP
            error = await self._write_tombstones(group, list(group.offsets), group_tombstone=True)
            if error != ErrorCode.NONE:
                return error
            group.apply(GroupEvent.REMOVED, self._clock_ms())
            del self._groups[group_id]
            log.info("group_deleted", group_id=group_id)
            return ErrorCode.NONE


def _described(group_id: str, error: ErrorCode, state: str, kind: str, protocol: str, members: list) -> dict:
    return {
        "error_code": error,
        "group_id": group_id,
        "group_state": state,
        "protocol_type": kind,
        "protocol_data": protocol,
        "members": members,
    }
