"""The KIP-848 consumer group coordinator: ConsumerGroupHeartbeat, ConsumerGroupDescribe, the member-epoch checks of
offset commits, and the type rules between consumer and classic groups (Kafka's GroupMetadataManager for groups of
type ``consumer``).

Guarantees:
- Requests for one group are serialized by a per-group lock; each heartbeat is answered from the group's state after
  it: the member's epoch, its assignment (sent when it joins, sends a full request, or its assignment changed) and
  the group's heartbeat interval (``consumer.heartbeat.interval.ms`` of the group, else
  ``group.consumer.heartbeat.interval.ms``).
- The group epoch goes up when a member joins or leaves, a subscription changes, or a subscribed topic's partition
  count changes; the target assignment is then recomputed at once by the group's assignor (the member's
  ``server_assignor``, else ``uniform``), so its epoch equals the group epoch after every request.
- Revocation before assignment (``consumer_group.reconcile``): a partition goes to its new owner only once the old
  one's heartbeat no longer lists it, or the old one is gone.
- Timers on one ``DeadlineHeap``: a member whose heartbeats stop for the group's session timeout
  (``consumer.session.timeout.ms`` / ``group.consumer.session.timeout.ms``) is removed; one that keeps partitions to
  revoke beyond its rebalance timeout is removed (fenced) too, freeing them.
- Type rules: a consumer heartbeat for a classic group with members is GROUP_ID_NOT_FOUND; a classic JoinGroup for a
  consumer group with members is INCONSISTENT_GROUP_PROTOCOL; an empty group of either type becomes the other
  (its committed offsets, kept by the classic coordinator, stay).
- Persisted as Kafka persists them (``protocol/internal/consumer_group_log.py``): a heartbeat that changed the
  group is answered once the records that changed (group epoch, assignment epoch, members' metadata, targets and
  current assignments) are durable in the group's ``__consumer_offsets`` partition. Loading rebuilds the groups
  (``install``), so after a restart members go on with their epochs and partitions, and the sessions of members
  that do not come back expire. An append that fails is answered with its error while the state in memory stays
  ahead of the log (Kafka reverts it): a member then retries, or after a restart is fenced and rejoins.
"""

from __future__ import annotations

import math
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog
import trio
from oncelog.broker.deadlines import DeadlineHeap
from oncelog.broker.group.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, TopicPartition
from oncelog.broker.group.consumer_group import (
    CONSUMER_GROUP_TYPE,
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
)
from oncelog.broker.group.consumer_group_records import group_records, rebuild_group
from oncelog.broker.group.listing import listed_groups
from oncelog.broker.group.state import GroupState
from oncelog.broker.group_configs import CONSUMER_HEARTBEAT_INTERVAL_MS, CONSUMER_SESSION_TIMEOUT_MS
from oncelog.broker.keyed_locks import KeyedLocks
from oncelog.broker.metadata import INTERNAL_TOPICS
from oncelog.protocol import DecodeError, ErrorCode

if TYPE_CHECKING:
    from collections.abc import Awaitable

    from oncelog.broker.config import BrokerConfig
    from oncelog.broker.group.coordinator import GroupCoordinator
    from oncelog.broker.group_configs import GroupConfigs
    from oncelog.broker.metadata import MetadataStore

log = structlog.get_logger(__name__)

#: Kafka's ``group.consumer.max.size`` default.
GROUP_CONSUMER_MAX_SIZE = 2**31 - 1
#: The first OffsetCommit version a KIP-848 member may commit with (Kafka: UNSUPPORTED_VERSION below it).
MEMBER_EPOCH_COMMIT_VERSION = 9
#: The two timers of a member.
_SESSION = "session"
_REBALANCE = "rebalance"


@dataclass(frozen=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat request, version-independent (v0: no regex; v0 may join without a member id)."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None
    rack_id: str | None
    rebalance_timeout_ms: int
    subscribed_topic_names: list[str] | None
    subscribed_topic_regex: str | None
    server_assignor: str | None
    topic_partitions: list[tuple[uuid.UUID, list[int]]] | None
    client_id: str
    client_host: str


class HeartbeatError(Exception):
    def __init__(self, error: ErrorCode, message: str | None = None) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def _error(error: ErrorCode, message: str | None = None) -> dict:
    return {
        "error_code": error,
        "error_message": message,
        "member_id": None,
        "member_epoch": -1,
        "heartbeat_interval_ms": 0,
        "assignment": None,
    }


class ConsumerGroupCoordinator:
    """Owns this node's KIP-848 groups; offsets stay with the classic coordinator (``classic``)."""

    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataStore,
        group_configs: GroupConfigs,
        classic: GroupCoordinator,
        *,
        ensure_offsets_topic: Callable[[], Awaitable[None]],
    ) -> None:
        """``classic``: the classic coordinator, which holds every group's offsets and writes the group records;
        ``group_configs``: per-group overrides of the session timeout and heartbeat interval."""
        self._config = config
        self._metadata = metadata
        self._group_configs = group_configs
        self._classic = classic
        self._ensure_offsets_topic = ensure_offsets_topic
        self._groups: dict[str, ConsumerGroup] = {}
        self._locks: KeyedLocks[str] = KeyedLocks()
        #: (group id, member id, _SESSION or _REBALANCE) -> when (trio.current_time()) that timer fires.
        self._timers: DeadlineHeap[tuple[str, str, str]] = DeadlineHeap()
        self._wakeup = trio.Event()
        self._timer_sleep_until = -math.inf
        self._running = False

    # Queries used by the classic path ---------------------------------------------------------------------------

    def get(self, group_id: str) -> ConsumerGroup | None:
        return self._groups.get(group_id)

    def is_consumer_group(self, group_id: str) -> bool:
        return group_id in self._groups

    async def claim_for_classic(self, group_id: str) -> ErrorCode:
        """A classic JoinGroup for ``group_id``: INCONSISTENT_GROUP_PROTOCOL while it is a consumer group with
        members; an empty consumer group is dropped, its records tombstoned (the group switches protocol, its
        offsets stay)."""
        if group_id not in self._groups:
            return ErrorCode.NONE
        async with self._locks(group_id):
            group = self._groups.get(group_id)
            if group is None:
                return ErrorCode.NONE
            if group.members:
                return ErrorCode.INCONSISTENT_GROUP_PROTOCOL
            if (error := await self._drop(group)) == ErrorCode.NONE:
                log.info("consumer_group_converted_to_classic", group_id=group_id)
            return error

    def check_commit(self, group_id: str, member_id: str, member_epoch: int, api_version: int | None) -> ErrorCode:
        """Kafka's ConsumerGroup.validateOffsetCommit for an OffsetCommit of ``api_version``, or (None) a
        TxnOffsetCommit, which answers ILLEGAL_GENERATION for a stale epoch (OffsetMetadataManager maps it so)."""
        group = self._groups[group_id]
        if member_epoch < 0 and not group.members:
            return ErrorCode.NONE  # the admin client, or a consumer without group management
        member = group.members.get(member_id)
        if member is None:
            return ErrorCode.UNKNOWN_MEMBER_ID
        if api_version is not None and api_version < MEMBER_EPOCH_COMMIT_VERSION:
            return ErrorCode.UNSUPPORTED_VERSION
        if member_epoch != member.epoch:
            return ErrorCode.STALE_MEMBER_EPOCH if api_version is not None else ErrorCode.ILLEGAL_GENERATION
        return ErrorCode.NONE

    def subscribed_topics(self, group_id: str) -> set[str]:
        """The topics the group's members subscribe to (by name or regex); empty for an unknown group."""
        group = self._groups.get(group_id)
        if group is None:
            return set()
        matches: dict[str, set[str]] = {}
        return {t for m in group.members.values() for t in self._member_topics(m, matches)}

    def list_groups(self, states: Iterable[str], types: Iterable[str]) -> list[dict]:
        """ListGroups' entries of the consumer groups (``listing.listed_groups``)."""
        groups = ((g.group_id, "consumer", g.state.value) for g in self._groups.values())
        return listed_groups(groups, states, types, CONSUMER_GROUP_TYPE)

    async def delete(self, group_id: str) -> ErrorCode | None:
        """DeleteGroups for a consumer group: NON_EMPTY_GROUP with members, else the group goes with its records
        (None: not a consumer group here)."""
        if group_id not in self._groups:
            return None
        async with self._locks(group_id):
            group = self._groups.get(group_id)
            if group is None:
                return None
            if group.members:
                return ErrorCode.NON_EMPTY_GROUP
            return await self._drop(group)

    async def _drop(self, group: ConsumerGroup) -> ErrorCode:
        """Tombstone the group's records, then forget it."""
        error = ErrorCode.NONE
        if group.persisted:
            tombstones: list[tuple[bytes, bytes | None]] = [(key, None) for key in group.persisted]
            error, _ = await self._classic.group_log.append(group.group_id, tombstones)
        if error == ErrorCode.NONE:
            del self._groups[group.group_id]
        return error

    # Persistence ------------------------------------------------------------------------------------------------

    async def _persist(self, group: ConsumerGroup, member_id: str | None = None) -> ErrorCode:
        """Append (durably) the records that changed since the last append, and tombstones for those gone. While
        the epochs and the members are those last appended, only member ``member_id`` can have changed (a heartbeat
        changes its own member; anything else bumps an epoch or changes the members), so only its records are
        looked at. On an error the state in
        memory stays ahead of the log (the member is told to retry, Kafka's errors)."""
        epochs = (group.group_epoch, group.assignment_epoch, group.membership_changes)
        full = member_id is None or group.persisted_epochs != epochs
        records = group_records(group, self._by_topic_id, None if full else member_id)
        changed: list[tuple[bytes, bytes | None]] = [(k, v) for k, v in records.items() if group.persisted.get(k) != v]
        if full:
            changed += [(k, None) for k in group.persisted if k not in records]
        if not changed:
            return ErrorCode.NONE
        error, _ = await self._classic.group_log.append(group.group_id, changed)
        if error == ErrorCode.NONE:
            if full:
                group.persisted = records
            else:
                group.persisted.update(records)
            group.persisted_epochs = epochs
        return error

    def install(self, group_id: str, records: dict[bytes, bytes]) -> None:
        """Rebuild a group from its records in ``__consumer_offsets`` (loading; records of topics that no longer
        exist are dropped). Its members' sessions start when the coordinator runs (or now, if it does)."""
        names = {t.topic_id: t.name for t in self._metadata.topics.values()}
        try:
            group = rebuild_group(group_id, records, names)
        except DecodeError as exc:
            # Kafka's later record versions or a damaged record: the members rejoin (offsets are kept apart).
            log.error("consumer_group_not_loaded", group_id=group_id, error=str(exc))
            return
        group.topic_partitions = self._subscribed_partitions(group)
        group.persisted = dict(records)
        group.persisted_epochs = (group.group_epoch, group.assignment_epoch, group.membership_changes)
        self._groups[group_id] = group
        if self._running:
            now = trio.current_time()
            for member in group.members.values():
                self._schedule(group_id, member, now, entered_revocation=True)

    def unload(self, leaves: Callable[[str], bool]) -> None:
        """This broker no longer coordinates the groups ``leaves`` selects: forget them and their timers."""
        for group_id in [g for g in self._groups if leaves(g)]:
            for member_id in self._groups.pop(group_id).members:
                self._cancel(group_id, member_id)

    # Configuration ----------------------------------------------------------------------------------------------

    def _group_config(self, group_id: str, name: str) -> int:
        value, _ = self._group_configs.value(group_id, name, self._config)
        return int(value)

    # ConsumerGroupHeartbeat -------------------------------------------------------------------------------------

    async def heartbeat(self, request: HeartbeatRequest, version: int) -> dict:
        try:
            _validate(request, version)
        except HeartbeatError as exc:
            return _error(exc.error, exc.message)
        classic = self._classic
        if (error := classic.status(request.group_id)) != ErrorCode.NONE:
            return _error(error)
        await self._ensure_offsets_topic()
        async with self._locks(request.group_id):
            try:
                response = self._heartbeat(request)
            except HeartbeatError as exc:
                return _error(exc.error, exc.message)
            group = self._groups.get(request.group_id)
            if group is not None and (error := await self._persist(group, request.member_id)) != ErrorCode.NONE:
                return _error(error)
            return response

    def _heartbeat(self, request: HeartbeatRequest) -> dict:
        group_id = request.group_id
        classic = self._classic.get(group_id)
        if classic is not None and (classic.members or not classic.is_(GroupState.EMPTY)):
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        group = self._groups.get(group_id)
        if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
            return self._leave(group, request)
        if group is None:
            if request.member_epoch != JOIN_GROUP_MEMBER_EPOCH:
                raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {group_id} not found.")
            group = ConsumerGroup(group_id)
            self._groups[group_id] = group
            log.info("consumer_group_created", group_id=group_id)
        now = trio.current_time()
        bump = False
        if request.member_epoch == JOIN_GROUP_MEMBER_EPOCH:
            member, bump = self._join(group, request)
        else:
            member = group.members.get(request.member_id)
            if member is None:
                raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Unknown member {request.member_id}.")
            _check_epoch(member, request, self._owned(request))
        member.left_static = False
        if request.rebalance_timeout_ms != -1:
            member.rebalance_timeout_ms = request.rebalance_timeout_ms
        if request.rack_id is not None:
            member.rack_id = request.rack_id
        if request.server_assignor is not None:
            member.server_assignor = request.server_assignor
        if request.subscribed_topic_names is not None and tuple(request.subscribed_topic_names) != member.subscribed:
            member.subscribed = tuple(request.subscribed_topic_names)
            bump = True
        if request.subscribed_topic_regex is not None:
            regex = request.subscribed_topic_regex or None
            if regex != member.regex:
                member.regex = regex
                bump = True
        partitions = self._subscribed_partitions(group)
        if partitions != group.topic_partitions:
            bump = True
        if bump:
            group.group_epoch += 1
        if group.group_epoch > group.assignment_epoch:
            self._assign(group, partitions)
        before = member.progress
        progress = group.reconcile(member, self._owned(request))
        self._schedule(group_id, member, now, entered_revocation=before.state is not MemberState.UNREVOKED_PARTITIONS)
        full = request.member_epoch == JOIN_GROUP_MEMBER_EPOCH or (
            request.rebalance_timeout_ms != -1
            and request.subscribed_topic_names is not None
            and request.topic_partitions is not None
        )
        assignment = None
        if full or progress.assigned != before.assigned:
            assignment = {"topic_partitions": self._by_topic_id(progress.assigned)}
        return {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "member_id": member.member_id,
            "member_epoch": progress.epoch,
            "heartbeat_interval_ms": self._group_config(group_id, CONSUMER_HEARTBEAT_INTERVAL_MS),
            "assignment": assignment,
        }

    def _join(self, group: ConsumerGroup, request: HeartbeatRequest) -> tuple[ConsumerMember, bool]:
        """A member joining with epoch 0: new, a static member's return, or a known member starting over."""
        member_id = request.member_id or str(uuid.uuid4())
        if request.instance_id is not None:
            old_id = group.static_members.get(request.instance_id)
            if old_id is not None:
                old = group.members[old_id]
                if not old.left_static and old_id != member_id:
                    raise HeartbeatError(
                        ErrorCode.UNRELEASED_INSTANCE_ID,
                        f"Static member {old_id} with instance id {request.instance_id} is not released yet.",
                    )
                self._cancel(group.group_id, old_id)
                if old_id != member_id:
                    return group.replace_static(old, member_id), False
                group.remove(old_id)
        elif member_id in group.members:
            # The member lost its state (fenced, or its answer): it starts over, its partitions are free.
            self._cancel(group.group_id, member_id)
            group.remove(member_id)
        if len(group.members) >= GROUP_CONSUMER_MAX_SIZE:
            raise HeartbeatError(ErrorCode.GROUP_MAX_SIZE_REACHED, f"The group {group.group_id} is full.")
        member = ConsumerMember(
            member_id=member_id,
            instance_id=request.instance_id,
            rack_id=request.rack_id,
            client_id=request.client_id,
            client_host=request.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
        )
        group.add(member)
        log.info("consumer_group_member_joined", group_id=group.group_id, member_id=member_id)
        return member, True

    def _leave(self, group: ConsumerGroup | None, request: HeartbeatRequest) -> dict:
        if group is None:
            raise HeartbeatError(ErrorCode.GROUP_ID_NOT_FOUND, f"Consumer group {request.group_id} not found.")
        member = group.members.get(request.member_id)
        if member is None:
            raise HeartbeatError(ErrorCode.UNKNOWN_MEMBER_ID, f"Unknown member {request.member_id}.")
        if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # It comes back soon under the same instance id: its partitions wait for it until its session ends.
            member.left_static = True
            self._timers.cancel((group.group_id, member.member_id, _REBALANCE))
        else:
            self._remove(group, member.member_id, "left the group")
        return {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "member_id": request.member_id,
            "member_epoch": request.member_epoch,
            "heartbeat_interval_ms": 0,
            "assignment": None,
        }

    def _remove(self, group: ConsumerGroup, member_id: str, reason: str) -> None:
        """The member goes (left, session expired, fenced): its partitions are free, a new target is computed."""
        self._cancel(group.group_id, member_id)
        group.remove(member_id)
        group.group_epoch += 1
        self._assign(group, self._subscribed_partitions(group))
        log.info("consumer_group_member_removed", group_id=group.group_id, member_id=member_id, reason=reason)

    def _assign(self, group: ConsumerGroup, partitions: dict[str, int]) -> None:
        names = [m.server_assignor for m in group.members.values() if m.server_assignor]
        # Kafka's rule: the assignor most members ask for (ties by name), else the default.
        name = max(sorted(set(names)), key=names.count) if names else DEFAULT_ASSIGNOR
        matches: dict[str, set[str]] = {}
        topics = {m.member_id: self._member_topics(m, matches) for m in group.members.values()}
        group.compute_target(ASSIGNORS[name], partitions, topics)
        group.topic_partitions = partitions

    # Topics -----------------------------------------------------------------------------------------------------

    def _member_topics(self, member: ConsumerMember, matches: dict[str, set[str]] | None = None) -> set[str]:
        """The member's topics: its names and the existing topics its regex fully matches (``matches`` caches each
        regex's topics over one pass, members usually sharing theirs)."""
        topics = set(member.subscribed)
        if member.regex is not None:
            cache = {} if matches is None else matches
            if member.regex not in cache:
                pattern = re.compile(member.regex)
                cache[member.regex] = {
                    t for t in self._metadata.topics if t not in INTERNAL_TOPICS and pattern.fullmatch(t)
                }
            topics |= cache[member.regex]
        return topics

    def _subscribed_partitions(self, group: ConsumerGroup) -> dict[str, int]:
        """Partition counts of the existing topics the members subscribe to (by name or regex)."""
        metadata = self._metadata
        result = {}
        matches: dict[str, set[str]] = {}
        for member in group.members.values():
            for name in self._member_topics(member, matches):
                if name not in result and (topic := metadata.get(name)) is not None:
                    result[name] = topic.partitions
        return result

    def _owned(self, request: HeartbeatRequest) -> frozenset[TopicPartition] | None:
        if request.topic_partitions is None:
            return None
        names = {t.topic_id: t.name for t in self._metadata.topics.values()}
        return frozenset(
            (names[topic_id], p) for topic_id, ps in request.topic_partitions if topic_id in names for p in ps
        )

    def _by_topic_id(self, partitions: Iterable[TopicPartition]) -> list[dict]:
        by_topic: dict[str, list[int]] = {}
        for topic, index in partitions:
            by_topic.setdefault(topic, []).append(index)
        result = []
        for name in sorted(by_topic):
            topic = self._metadata.get(name)
            if topic is not None:
                result.append({"topic_id": topic.topic_id, "partitions": sorted(by_topic[name])})
        return result

    # Timers -----------------------------------------------------------------------------------------------------

    def _schedule(self, group_id: str, member: ConsumerMember, now: float, *, entered_revocation: bool) -> None:
        session_s = self._group_config(group_id, CONSUMER_SESSION_TIMEOUT_MS) / 1000
        self._set_timer((group_id, member.member_id, _SESSION), now + session_s)
        key = (group_id, member.member_id, _REBALANCE)
        if member.progress.state is not MemberState.UNREVOKED_PARTITIONS:
            self._timers.cancel(key)
        elif entered_revocation or key not in self._timers:
            self._set_timer(key, now + member.rebalance_timeout_ms / 1000)

    def _set_timer(self, key: tuple[str, str, str], deadline: float) -> None:
        self._timers.schedule(key, deadline)
        if deadline < self._timer_sleep_until:
            self._wakeup.set()

    def _cancel(self, group_id: str, member_id: str) -> None:
        self._timers.cancel((group_id, member_id, _SESSION))
        self._timers.cancel((group_id, member_id, _REBALANCE))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Expire sessions and rebalance timeouts until cancelled. Loaded members' sessions start now."""
        now = trio.current_time()
        for group in self._groups.values():
            for member in group.members.values():
                self._schedule(group.group_id, member, now, entered_revocation=True)
        self._running = True
        task_status.started()
        while True:
            self._timer_sleep_until = self._timers.next_deadline()
            with trio.move_on_at(self._timer_sleep_until):
                await self._wakeup.wait()
            self._timer_sleep_until = -math.inf
            self._wakeup = trio.Event()
            while (key := self._timers.pop_due(trio.current_time())) is not None:
                group_id, member_id, kind = key
                async with self._locks(group_id):
                    group = self._groups.get(group_id)
                    if group is not None and member_id in group.members:
                        reason = "session timeout expired" if kind == _SESSION else "rebalance timeout expired"
                        self._remove(group, member_id, reason)
                        if (error := await self._persist(group)) != ErrorCode.NONE:
                            log.warning("consumer_group_not_persisted", group_id=group_id, error=error.name)

    # ConsumerGroupDescribe --------------------------------------------------------------------------------------

    def describe(self, group_id: str) -> dict:
        """One ConsumerGroupDescribe entry (Kafka: GROUP_ID_NOT_FOUND for an unknown or classic group)."""
        if (error := self._classic.status(group_id)) != ErrorCode.NONE:
            return _described_error(group_id, error, None)
        group = self._groups.get(group_id)
        if group is None:
            classic = self._classic.get(group_id)
            message = f"Group {group_id} is not a consumer group." if classic else f"Group {group_id} not found."
            return _described_error(group_id, ErrorCode.GROUP_ID_NOT_FOUND, message)
        return {
            "error_code": ErrorCode.NONE,
            "error_message": None,
            "group_id": group_id,
            "group_state": group.state.value,
            "group_epoch": group.group_epoch,
            "assignment_epoch": group.assignment_epoch,
            "assignor_name": group.assignor_name or DEFAULT_ASSIGNOR,
            "members": [
                {
                    "member_id": m.member_id,
                    "instance_id": m.instance_id,
                    "rack_id": m.rack_id,
                    "member_epoch": m.epoch,
                    "client_id": m.client_id,
                    "client_host": m.client_host,
                    "subscribed_topic_names": list(m.subscribed),
                    "subscribed_topic_regex": m.regex,
                    "assignment": {"topic_partitions": self._described(m.progress.assigned)},
                    "target_assignment": {"topic_partitions": self._described(group.target.get(m.member_id, ()))},
                }
                for m in group.members.values()
            ],
        }

    def _described(self, partitions: Iterable[TopicPartition]) -> list[dict]:
        return [
            {**entry, "topic_name": name}
            for entry in self._by_topic_id(partitions)
            for name in [self._name_of(entry["topic_id"])]
        ]

    def _name_of(self, topic_id: uuid.UUID) -> str:
        return next((t.name for t in self._metadata.topics.values() if t.topic_id == topic_id), "")


def _described_error(group_id: str, error: ErrorCode, message: str | None) -> dict:
    return {
        "error_code": error,
        "error_message": message,
        "group_id": group_id,
        "group_state": "Dead",
        "group_epoch": -1,
        "assignment_epoch": -1,
        "assignor_name": "",
        "members": [],
    }


def _validate(request: HeartbeatRequest, version: int) -> None:
    """Kafka's throwIfConsumerGroupHeartbeatRequestIsInvalid."""
    invalid = ErrorCode.INVALID_REQUEST
    if not request.group_id:
        raise HeartbeatError(invalid, "GroupId can't be empty.")
    if request.instance_id is not None and not request.instance_id:
        raise HeartbeatError(invalid, "InstanceId can't be empty.")
    if request.rack_id is not None and not request.rack_id:
        raise HeartbeatError(invalid, "RackId can't be empty.")
    epoch = request.member_epoch
    if (version >= 1 or epoch != JOIN_GROUP_MEMBER_EPOCH) and not request.member_id:
        raise HeartbeatError(invalid, "MemberId can't be empty.")
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        if request.rebalance_timeout_ms == -1:
            raise HeartbeatError(invalid, "RebalanceTimeoutMs must be provided in first request.")
        if request.topic_partitions is None or any(ps for _, ps in request.topic_partitions):
            raise HeartbeatError(invalid, "TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise HeartbeatError(invalid, "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.")
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.instance_id is None:
            raise HeartbeatError(invalid, "InstanceId can't be null.")
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        raise HeartbeatError(invalid, f"MemberEpoch {epoch} is invalid.")
    if request.server_assignor is not None and request.server_assignor not in ASSIGNORS:
        raise HeartbeatError(
            ErrorCode.UNSUPPORTED_ASSIGNOR, f"ServerAssignor {request.server_assignor} is not supported."
        )
    if request.subscribed_topic_regex:
        try:
            re.compile(request.subscribed_topic_regex)
        except re.error as exc:
            raise HeartbeatError(ErrorCode.INVALID_REGULAR_EXPRESSION, str(exc)) from None


def _check_epoch(member: ConsumerMember, request: HeartbeatRequest, owned: frozenset[TopicPartition] | None) -> None:
    """Kafka's throwIfMemberEpochIsInvalid: an epoch ahead of the member's is fenced; one behind is accepted only
    when it is the previous epoch and the member owns nothing beyond what it is assigned (a lost answer)."""
    received, progress = request.member_epoch, member.progress
    if received > progress.epoch:
        raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, f"Epoch {received} is ahead of {progress.epoch}.")
    if received < progress.epoch and (
        received != progress.previous_epoch or owned is None or not owned <= progress.assigned
    ):
        raise HeartbeatError(ErrorCode.FENCED_MEMBER_EPOCH, f"Epoch {received} is behind {progress.epoch}.")
