"""A classic consumer group's in-memory state (Kafka's GroupMetadata / MemberMetadata), with no I/O.

Guarantees: state changes follow the table of ``group.state`` (Kafka's ClassicGroupState; anything else raises
IllegalGroupTransitionError); the leader is always a current member (or None when there are none); the static
member map (group.instance.id -> member id) only names current members.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import trio
from oncelog.broker.group.state import GroupEvent, GroupState, allows, next_state
from oncelog.protocol import DecodeError
from oncelog.protocol.consumer_protocol import PROTOCOL_TYPE as CONSUMER_PROTOCOL_TYPE
from oncelog.protocol.consumer_protocol import decode_subscription
from oncelog.protocol.internal.group_log import OffsetValue


class Reply:
    """A response a waiting JoinGroup / SyncGroup handler receives once the rebalance gets far enough."""

    def __init__(self) -> None:
        self.event = trio.Event()
        self.value: object = None

    def set(self, value: object) -> None:
        self.value = value
        self.event.set()

    async def wait(self) -> object:
        await self.event.wait()
        return self.value


@dataclass
class Member:
    """One member of a group, and the JoinGroup / SyncGroup response it may be waiting for."""

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    #: (name, metadata) in the member's order of preference.
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    #: Set while a JoinGroup / SyncGroup of this member waits for the rebalance to progress.
    join_reply: Reply | None = None
    sync_reply: Reply | None = None
    #: trio.current_time() of the last heartbeat, join or sync.
    last_heartbeat_s: float = 0.0
    #: Joined in the current rebalance and never got a JoinGroup answer (Kafka's isNew).
    is_new: bool = False

    @property
    def awaiting_join(self) -> bool:
        return self.join_reply is not None

    @property
    def awaiting_sync(self) -> bool:
        return self.sync_reply is not None

    def metadata_for(self, protocol: str) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        """The same protocols with the same metadata, in the same order."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        """The member's most preferred protocol among ``candidates``."""
        for name, _ in self.protocols:
            if name in candidates:
                return name
        raise ValueError("member supports none of the candidate protocols")

    def answer_join(self, result: dict) -> None:
        """Complete a waiting JoinGroup (no-op when none waits)."""
        if self.join_reply is not None:
            self.join_reply.set(result)
            self.join_reply = None
            self.is_new = False

    def answer_sync(self, error: int, assignment: bytes) -> None:
        """Complete a waiting SyncGroup with (error, assignment) (no-op when none waits)."""
        if self.sync_reply is not None:
            self.sync_reply.set((error, assignment))
            self.sync_reply = None


@dataclass
class CommittedOffset:
    """A committed offset and the ``__consumer_offsets`` offset of its record (a later record wins)."""

    value: OffsetValue
    record_offset: int


@dataclass
class Group:
    """One group: membership, generation, protocol, offsets (committed and pending transactional)."""

    group_id: str
    state: GroupState = GroupState.EMPTY
    generation_id: int = 0
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    #: Member ids handed out with MEMBER_ID_REQUIRED, not joined yet -> when they expire (trio.current_time()).
    pending_members: dict[str, float] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    state_timestamp_ms: int = -1
    offsets: dict[tuple[str, int], CommittedOffset] = field(default_factory=dict)
    #: producer id -> partition -> offset written by TxnOffsetCommit, waiting for the transaction's marker.
    pending_txn_offsets: dict[int, dict[tuple[str, int], CommittedOffset]] = field(default_factory=dict)
    #: Kafka's GroupMetadata.subscribedTopics, set at each new generation and at load: the topics the members of
    #: a ``consumer`` protocol group subscribe to; None when not known (no members, no protocol chosen, another
    #: protocol type, or a subscription that does not decode).
    subscribed_topics: frozenset[str] | None = None
    #: When the join phase ends (trio.current_time()); None outside PreparingRebalance.
    join_deadline_s: float | None = None
    #: The first rebalance of an empty group waits group.initial.rebalance.delay.ms, extended while members arrive.
    initial_delay_remaining_ms: int | None = None
    new_member_added: bool = False

    # State --------------------------------------------------------------------------------------------------

    def is_(self, state: GroupState) -> bool:
        return self.state is state

    def apply(self, event: GroupEvent, now_ms: int) -> GroupState:
        """Move to the state ``event`` leads to (``state.next_state``: IllegalGroupTransitionError when none), stamped
        ``now_ms``; returns it."""
        self.state = next_state(self.group_id, self.state, event)
        self.state_timestamp_ms = now_ms
        return self.state

    @property
    def can_rebalance(self) -> bool:
        """Kafka's canRebalance: the state allows PREPARE_REBALANCE."""
        return allows(self.state, GroupEvent.PREPARE_REBALANCE)

    # Members ------------------------------------------------------------------------------------------------

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.pop(member.member_id, None)

    def remove(self, member_id: str) -> Member | None:
        member = self.members.pop(member_id, None)
        if member is None:
            return None
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return member

    def replace_static_member(self, instance_id: str, old_id: str, new_id: str) -> Member:
        """Give a rejoining static member its new member id (the old id is fenced from now on)."""
        member = self.members.pop(old_id)
        # A waiting JoinGroup / SyncGroup of the old id is answered with FENCED_INSTANCE_ID by the caller.
        member.member_id = new_id
        self.members[new_id] = member
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return member

    def static_member_fenced(self, member_id: str, instance_id: str | None) -> bool:
        """Kafka's isStaticMemberFenced: the instance id is known under another member id."""
        if instance_id is None:
            return False
        known = self.static_members.get(instance_id)
        return known is not None and known != member_id

    @property
    def all_joined(self) -> bool:
        """Every member has rejoined and no MEMBER_ID_REQUIRED member is outstanding."""
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    @property
    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    # Protocols ----------------------------------------------------------------------------------------------

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        """Kafka's supportsProtocols: an empty group takes any non-empty set; otherwise the type must match and
        one of the member's protocols must be supported by every current member."""
        if not self.members:
            return bool(protocol_type) and bool(protocols)
        if protocol_type != self.protocol_type:
            return False
        counts = self._protocol_counts()
        return any(counts[name] == len(self.members) for name, _ in protocols)

    def _protocol_counts(self) -> Counter[str]:
        counts: Counter[str] = Counter()
        for member in self.members.values():
            counts.update({name for name, _ in member.protocols})
        return counts

    def select_protocol(self) -> str:
        """Kafka's selectProtocol: among protocols every member supports, the one most members prefer (ties go
        to the candidate listed first by the group's members)."""
        counts = self._protocol_counts()
        ordered = [name for m in self.members.values() for name, _ in m.protocols]
        candidates = {name for name in ordered if counts[name] == len(self.members)}
        votes = Counter(member.vote(candidates) for member in self.members.values())
        best = max(votes.values())
        return next(name for name in ordered if votes.get(name) == best)

    def refresh_subscribed_topics(self) -> None:
        """Kafka's computeSubscribedTopics: the union of the members' subscriptions under the chosen protocol."""
        self.subscribed_topics = None
        if self.protocol_type != CONSUMER_PROTOCOL_TYPE or not self.members or self.protocol_name is None:
            return
        topics: set[str] = set()
        try:
            for member in self.members.values():
                topics.update(decode_subscription(member.metadata_for(self.protocol_name)))
        except DecodeError:
            return
        self.subscribed_topics = frozenset(topics)

    def is_subscribed_to(self, topic: str) -> bool:
        """Kafka's isSubscribedToTopic: a group whose subscriptions are not known counts as subscribed to all."""
        return self.subscribed_topics is None or topic in self.subscribed_topics

    # Offsets ------------------------------------------------------------------------------------------------

    def has_pending_txn_offset(self, topic: str, partition: int) -> bool:
        return any((topic, partition) in offsets for offsets in self.pending_txn_offsets.values())

    def partitions_with_offsets(self) -> set[tuple[str, int]]:
        """The partitions holding a committed or a pending transactional offset."""
        return set(self.offsets).union(*self.pending_txn_offsets.values())

    def expired_offsets(self, now_ms: int, retention_ms: int) -> list[tuple[str, int]]:
        """The partitions whose committed offset has expired at ``now_ms`` (nothing is removed): Kafka's
        GroupMetadata.removeExpiredOffsets, with Kafka 4's rule for pending transactional offsets
        (OffsetMetadataManager.cleanupExpiredOffsets, ClassicGroup.offsetExpirationCondition).

        Retention (``offsets.retention.minutes``) counts, for a group without protocol type (it only stores
        offsets), from each offset's commit; for an Empty group, from when it became Empty (from the commit when
        that time is unknown: -1, an old metadata record); for a Stable ``consumer`` group whose subscriptions are
        known, from the commit, and only offsets of topics no member subscribes to expire. Nothing expires in any
        other group (rebalancing; Stable with another protocol type or with subscriptions that do not decode). An
        offset committed with an explicit retention (OffsetCommit v2-v4 ``retention_time_ms``) expires at its
        expire timestamp instead. A partition with a pending transactional offset does not expire: its tombstone
        would drop that offset too."""
        subscribed: frozenset[str] = frozenset()
        since_state = False
        if self.protocol_type is None:
            pass
        elif self.is_(GroupState.EMPTY):
            since_state = self.state_timestamp_ms >= 0
        elif (
            self.is_(GroupState.STABLE)
            and self.protocol_type == CONSUMER_PROTOCOL_TYPE
            and self.subscribed_topics is not None
        ):
            subscribed = self.subscribed_topics
        else:
            return []
        expired = []
        for tp, committed in self.offsets.items():
            if tp[0] in subscribed or self.has_pending_txn_offset(*tp):
                continue
            value = committed.value
            if value.expire_timestamp_ms >= 0:
                is_expired = now_ms >= value.expire_timestamp_ms
            else:
                base = self.state_timestamp_ms if since_state else value.commit_timestamp_ms
                is_expired = now_ms - base >= retention_ms
            if is_expired:
                expired.append(tp)
        return expired

    def remove_offsets(self, partitions: list[tuple[str, int]]) -> None:
        """What a tombstone does (Kafka's removeOffsets and its tombstone replay): the committed offset and every
        pending transactional offset of each partition go."""
        for tp in partitions:
            self.offsets.pop(tp, None)
            for pending in self.pending_txn_offsets.values():
                pending.pop(tp, None)

    def complete_txn_offsets(self, producer_id: int, commit: bool) -> None:
        """Apply (commit) or drop (abort) a producer's pending offsets; a later plain commit is kept."""
        pending = self.pending_txn_offsets.pop(producer_id, {})
        if not commit:
            return
        for tp, committed in pending.items():
            current = self.offsets.get(tp)
            if current is None or current.record_offset < committed.record_offset:
                self.offsets[tp] = committed
