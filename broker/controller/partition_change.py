"""A partition's replication state and every change the controller may make to it, as pure functions.

The state is Kafka's ``PartitionRegistration`` in small: replicas (assignment order, preferred leader first), the
in-sync replicas, the leader and two epochs. ``leader_epoch`` grows whenever the leader changes (replicas and clients
fence stale leaders with it); ``partition_epoch`` grows on every change (the AlterPartition guard: a change computed
from an older state is refused). Everything that changes a partition's state lives in this module:

- ``elect_leader``: brokers came or went; the leader epoch grows if the leader changes.
- ``alter_isr``: the leader shrinks or expands its ISR (AlterPartition); leader epoch unchanged. Refused with
  NOT_LEADER_OR_FOLLOWER, FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION, INVALID_REQUEST or INELIGIBLE_REPLICA.
- ``elect_preferred``: ElectLeaders (PREFERRED) or the automatic leader rebalance. Refused with ELECTION_NOT_NEEDED
  or PREFERRED_LEADER_NOT_AVAILABLE.
- ``shut_down``: a broker's controlled shutdown; it leaves the ISR and any leadership.

Rules from Kafka's KRaft controller (``PartitionChangeBuilder``): the new leader is the first replica in assignment
order that is in the ISR and alive; the ISR never becomes empty (its last member stays, so that broker can be elected
cleanly when it returns) while the leader becomes ``NO_LEADER``; an unclean election
(``unclean.leader.election.enable``) takes the first live replica and makes it the whole ISR.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from oncelog.protocol.errors import ErrorCode

from .refused import Refused

#: Kafka's leader id for a partition that has none (Metadata answers LEADER_NOT_AVAILABLE for it).
NO_LEADER = -1


@dataclass(frozen=True)
class PartitionState:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0

    @classmethod
    def new(cls, replicas: Sequence[int], live: Collection[int]) -> PartitionState:
        """A new partition: every live replica in sync, the first live one leading."""
        isr = tuple(r for r in replicas if r in live)
        return cls(replicas=tuple(replicas), isr=isr, leader=isr[0] if isr else NO_LEADER)

    def to_json(self) -> bytes:
        return json.dumps(
            {
                "replicas": list(self.replicas),
                "isr": list(self.isr),
                "leader": self.leader,
                "leader_epoch": self.leader_epoch,
                "partition_epoch": self.partition_epoch,
            },
            separators=(",", ":"),
        ).encode()

    @classmethod
    def from_json(cls, data: bytes) -> PartitionState:
        raw = json.loads(data)
        return cls(
            replicas=tuple(raw["replicas"]),
            isr=tuple(raw["isr"]),
            leader=int(raw["leader"]),
            leader_epoch=int(raw["leader_epoch"]),
            partition_epoch=int(raw["partition_epoch"]),
        )


def elect_leader(state: PartitionState, live: Collection[int], *, unclean: bool = False) -> PartitionState:
    """The state once dead brokers leave the ISR and, if the leader is gone, a new one is chosen from the ISR."""
    isr = tuple(r for r in state.isr if r in live) or state.isr[-1:]
    if state.leader in isr and state.leader in live:
        leader = state.leader
    else:
        leader = next((r for r in state.replicas if r in isr and r in live), NO_LEADER)
        if leader == NO_LEADER and unclean:
            leader = next((r for r in state.replicas if r in live), NO_LEADER)
            if leader != NO_LEADER:
                isr = (leader,)
    return _changed(state, leader=leader, isr=isr)


def alter_isr(
    state: PartitionState,
    *,
    broker: int,
    leader_epoch: int,
    partition_epoch: int,
    new_isr: Sequence[int],
    live: Collection[int],
) -> PartitionState:
    """The leader ``broker``'s AlterPartition, checked as Kafka's controller checks it."""
    if broker != state.leader:
        raise Refused(ErrorCode.NOT_LEADER_OR_FOLLOWER, f"broker {broker} is not the leader ({state.leader})")
    if leader_epoch != state.leader_epoch:
        raise Refused(
            ErrorCode.FENCED_LEADER_EPOCH, f"leader epoch {leader_epoch} is not the current {state.leader_epoch}"
        )
    if partition_epoch != state.partition_epoch:
        raise Refused(
            ErrorCode.INVALID_UPDATE_VERSION,
            f"partition epoch {partition_epoch} is not the current {state.partition_epoch}",
        )
    if broker not in new_isr or not set(new_isr) <= set(state.replicas) or len(set(new_isr)) != len(new_isr):
        raise Refused(ErrorCode.INVALID_REQUEST, f"ISR {list(new_isr)} is not a set of replicas with the leader")
    gone = [r for r in new_isr if r not in live and r not in state.isr]
    if gone:
        raise Refused(ErrorCode.INELIGIBLE_REPLICA, f"replicas {gone} are not alive and cannot join the ISR")
    ordered = tuple(r for r in state.replicas if r in new_isr)
    return _changed(state, leader=state.leader, isr=ordered)


def elect_preferred(state: PartitionState, live: Collection[int]) -> PartitionState:
    """Leadership back to the first replica of the assignment, if it is alive and in sync."""
    preferred = state.replicas[0]
    if state.leader == preferred:
        raise Refused(ErrorCode.ELECTION_NOT_NEEDED, "the preferred replica already leads")
    if preferred not in state.isr or preferred not in live:
        raise Refused(
            ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, f"preferred replica {preferred} is not alive and in sync"
        )
    return _changed(state, leader=preferred, isr=state.isr)


def shut_down(state: PartitionState, broker: int, live: Collection[int]) -> PartitionState:
    """``broker`` is stopping on purpose: it leaves the ISR (unless it is the last member) and gives up leadership."""
    remaining = [r for r in live if r != broker]
    isr = tuple(r for r in state.isr if r != broker) or state.isr
    elected = elect_leader(replace(state, isr=isr), remaining)
    return _changed(state, leader=elected.leader, isr=elected.isr)


def _changed(state: PartitionState, *, leader: int, isr: tuple[int, ...]) -> PartitionState:
    if leader == state.leader and isr == state.isr:
        return state
    return replace(
        state,
        leader=leader,
        isr=isr,
        leader_epoch=state.leader_epoch + (leader != state.leader),
        partition_epoch=state.partition_epoch + 1,
    )
