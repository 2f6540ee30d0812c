"""A KIP-848 consumer group in memory: members with epochs, the group epoch, the target assignment and its epoch,
and the reconciliation of each member towards its target (Kafka's ConsumerGroup and CurrentAssignmentBuilder).

Guarantees:
- ``reconcile`` never hands a member a partition another member still holds (assigned or pending revocation): such
  a partition stays unreleased until its holder acknowledges the revocation (its heartbeat no longer lists it) or
  leaves. So each partition has at most one owner at any time.
- A member with partitions to revoke keeps its epoch until it acknowledged the revocation; a member reaching its
  target takes the target assignment epoch.
- ``owners`` always maps each partition held by a member (assigned or pending revocation) to that member and the
  epoch it holds it at; ``set_progress`` and ``remove`` keep it so.
No I/O here: the coordinator (``consumer_coordinator.py``) serializes access, persists nothing and keeps the timers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum

from oncelog.broker.group.assignors import Assignor, MemberSpec, TopicPartition

#: Member epochs with a meaning in ConsumerGroupHeartbeat (Kafka's ConsumerGroupHeartbeatRequest constants).
JOIN_GROUP_MEMBER_EPOCH = 0
LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
#: Kafka's Group.GroupType name of KIP-848 groups (ListGroups v5).
CONSUMER_GROUP_TYPE = "consumer"


class MemberState(Enum):
    """Kafka's MemberState: where a member is in its reconciliation."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"
    UNRELEASED_PARTITIONS = "unreleased_partitions"


class ConsumerGroupState(Enum):
    """Kafka's ConsumerGroup.ConsumerGroupState, by the names ListGroups / ConsumerGroupDescribe report."""

    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"


@dataclass(frozen=True)
class Progress:
    """A member's reconciliation: its epoch (and the previous one), state, the partitions it may use and those it
    must give up."""

    epoch: int
    previous_epoch: int
    state: MemberState
    assigned: frozenset[TopicPartition]
    revoking: frozenset[TopicPartition]


NEW_MEMBER = Progress(0, 0, MemberState.STABLE, frozenset(), frozenset())


def reconcile(
    current: Progress,
    target: frozenset[TopicPartition],
    target_epoch: int,
    owned: frozenset[TopicPartition] | None,
    held_elsewhere: Callable[[TopicPartition], bool],
) -> Progress:
    """Kafka's CurrentAssignmentBuilder.build: the member's next progress towards ``target`` (at ``target_epoch``).

    ``owned`` is what the member's heartbeat says it holds (None: not sent, it is assumed to hold everything it
    was given); ``held_elsewhere`` tells whether a partition is still held by another member (or pending revocation)."""
    if current.state is MemberState.STABLE:
        if current.epoch == target_epoch:
            return current
        return _next(current, current.epoch, target, target_epoch, owned, held_elsewhere)
    if current.state is MemberState.UNREVOKED_PARTITIONS:
        if _owns_any(owned, current.revoking):
            return current
        return _next(current, current.epoch + 1, target, target_epoch, owned, held_elsewhere)
    return _next(current, current.epoch, target, target_epoch, owned, held_elsewhere)


def _owns_any(owned: frozenset[TopicPartition] | None, partitions: frozenset[TopicPartition]) -> bool:
    return owned is None or not owned.isdisjoint(partitions)


def _next(
    current: Progress,
    epoch: int,
    target: frozenset[TopicPartition],
    target_epoch: int,
    owned: frozenset[TopicPartition] | None,
    held_elsewhere: Callable[[TopicPartition], bool],
) -> Progress:
    kept = current.assigned & target
    revoking = current.assigned - kept
    wanted = target - kept
    free = frozenset(tp for tp in wanted if not held_elsewhere(tp))
    unreleased = len(free) < len(wanted)
    if revoking and _owns_any(owned, revoking):
        # Revocation first: the member stays at its epoch, keeps only what it keeps, and gets nothing new yet.
        return Progress(epoch, current.epoch, MemberState.UNREVOKED_PARTITIONS, kept, revoking)
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return Progress(target_epoch, current.epoch, state, kept | free, frozenset())


@dataclass
class ConsumerMember:
    """One member of a consumer group, as its heartbeats described it."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    subscribed: tuple[str, ...] = ()
    regex: str | None = None
    server_assignor: str | None = None
    progress: Progress = NEW_MEMBER
    #: Left with epoch -2 (a static member about to come back): it keeps its partitions until its session ends.
    left_static: bool = False

    @property
    def epoch(self) -> int:
        return self.progress.epoch


@dataclass
class ConsumerGroup:
    """One consumer group: members, epochs, target assignment and who holds which partition."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    #: Static members by group.instance.id.
    static_members: dict[str, str] = field(default_factory=dict)
    #: Member id -> its target assignment at ``assignment_epoch``.
    target: dict[str, frozenset[TopicPartition]] = field(default_factory=dict)
    #: Partition -> (member id, epoch) of the member holding it (assigned or pending revocation).
    owners: dict[TopicPartition, tuple[str, int]] = field(default_factory=dict)
    #: Partition counts of the subscribed topics the target assignment was computed from.
    topic_partitions: dict[str, int] = field(default_factory=dict)
    assignor_name: str = ""
    #: The records last appended for the group (key -> value), to append only what changes.
    persisted: dict[bytes, bytes] = field(default_factory=dict)
    #: Members added or removed so far (a static member's replacement changes no epoch).
    membership_changes: int = 0
    #: (group epoch, assignment epoch, membership changes) when ``persisted`` was last appended.
    persisted_epochs: tuple[int, int, int] = (-1, -1, -1)

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        for m in self.members.values():
            if m.epoch != self.assignment_epoch or m.progress.state is not MemberState.STABLE:
                return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def subscribed_topics(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed}

    def add(self, member: ConsumerMember) -> None:
        self.membership_changes += 1
        self.members[member.member_id] = member
        if member.instance_id is not None:
            self.static_members[member.instance_id] = member.member_id
        self.set_progress(member, member.progress)

    def remove(self, member_id: str) -> ConsumerMember | None:
        """Drop the member: its partitions are free for others, its target goes."""
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        self.membership_changes += 1
        self._release(member)
        self.target.pop(member_id, None)
        if member.instance_id is not None and self.static_members.get(member.instance_id) == member_id:
            del self.static_members[member.instance_id]
        return member

    def _release(self, member: ConsumerMember) -> None:
        for tp in member.progress.assigned | member.progress.revoking:
            if self.owners.get(tp, ("",))[0] == member.member_id:
                del self.owners[tp]

    def set_progress(self, member: ConsumerMember, progress: Progress) -> None:
        self._release(member)
        member.progress = progress
        for tp in progress.assigned | progress.revoking:
            self.owners[tp] = (member.member_id, progress.epoch)

    def held_elsewhere(self, member_id: str) -> Callable[[TopicPartition], bool]:
        owners = self.owners

        def held(tp: TopicPartition) -> bool:
            owner = owners.get(tp)
            return owner is not None and owner[0] != member_id

        return held

    def compute_target(
        self, assignor: Assignor, partitions: Mapping[str, int], topics: Mapping[str, Iterable[str]]
    ) -> None:
        """A new target assignment (sticky to the previous one) at the group epoch; ``topics`` gives each member's
        subscribed topics (names and regex matches)."""
        specs = {
            m.member_id: MemberSpec(frozenset(topics[m.member_id]), self.target.get(m.member_id, m.progress.assigned))
            for m in self.members.values()
        }
        result = assignor.assign(specs, partitions)
        self.target = {m: frozenset(tps) for m, tps in result.items()}
        self.assignment_epoch = self.group_epoch
        self.assignor_name = assignor.name

    def reconcile(self, member: ConsumerMember, owned: frozenset[TopicPartition] | None) -> Progress:
        """Move the member towards its target; returns its new progress (also stored)."""
        target = self.target.get(member.member_id, frozenset())
        progress = reconcile(
            member.progress, target, self.assignment_epoch, owned, self.held_elsewhere(member.member_id)
        )
        if progress != member.progress:
            self.set_progress(member, progress)
        return progress

    def replace_static(self, old: ConsumerMember, new_id: str) -> ConsumerMember:
        """A static member rejoining under a new member id takes the old one's place, epoch and partitions."""
        target = self.target.get(old.member_id)
        self.remove(old.member_id)
        member = replace(old, member_id=new_id, progress=NEW_MEMBER, left_static=False)
        self.add(member)
        self.set_progress(member, old.progress)
        if target is not None:
            self.target[new_id] = target
        return member
