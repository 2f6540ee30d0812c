"""The classic group state machine as one table (Kafka's ClassicGroupState and its validPreviousStates): everything
that affects a classic group's state lives here. The coordinator reports what happened (a ``GroupEvent``);
``next_state`` says where that leads, and raises IllegalGroupTransitionError for an event the group's state does not
allow: such a call is a bug in the coordinator, never a client's error (clients get error codes before it).

    Empty, Stable, CompletingRebalance --PREPARE_REBALANCE--> PreparingRebalance
    PreparingRebalance --JOIN_COMPLETED--> CompletingRebalance
    PreparingRebalance --JOIN_COMPLETED_EMPTY--> Empty
    CompletingRebalance --ASSIGNMENT_STORED--> Stable
    any state --REMOVED--> Dead

A group read back from ``__consumer_offsets`` starts in ``loaded_state`` (Stable with members, else Empty), as Kafka's
GroupMetadata.loadGroup sets it: loading is not a transition. These are the classic (JoinGroup / SyncGroup) groups'
states; KIP-848 consumer groups have a state machine of their own.
"""

from __future__ import annotations

import enum


class GroupState(enum.Enum):
    """Kafka's classic group states (ClassicGroupState); ``.value`` is the name DescribeGroups / ListGroups report."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class GroupEvent(enum.Enum):
    """What the coordinator reports to a classic group's state machine (each member says which Kafka step it is)."""

    #: A member joined, rejoined, left or expired, or storing the assignment failed (Kafka's prepareRebalance).
    PREPARE_REBALANCE = enum.auto()
    #: The join phase ended with members: a new generation waits for the leader's assignment (onCompleteJoin).
    JOIN_COMPLETED = enum.auto()
    #: The join phase ended with no member left: a new, empty generation (onCompleteJoin).
    JOIN_COMPLETED_EMPTY = enum.auto()
    #: The leader's SyncGroup assignment is durable in ``__consumer_offsets`` and handed out.
    ASSIGNMENT_STORED = enum.auto()
    #: The group is gone: DeleteGroups, or the expiration of the last offset of an Empty group.
    REMOVED = enum.auto()


_S = GroupState
_E = GroupEvent

#: (state, event) -> the state the event leads to; a pair missing from the table is an illegal transition.
TRANSITIONS: dict[tuple[GroupState, GroupEvent], GroupState] = {
    (_S.EMPTY, _E.PREPARE_REBALANCE): _S.PREPARING_REBALANCE,
    (_S.STABLE, _E.PREPARE_REBALANCE): _S.PREPARING_REBALANCE,
    (_S.COMPLETING_REBALANCE, _E.PREPARE_REBALANCE): _S.PREPARING_REBALANCE,
    (_S.PREPARING_REBALANCE, _E.JOIN_COMPLETED): _S.COMPLETING_REBALANCE,
    (_S.PREPARING_REBALANCE, _E.JOIN_COMPLETED_EMPTY): _S.EMPTY,
    (_S.COMPLETING_REBALANCE, _E.ASSIGNMENT_STORED): _S.STABLE,
    **{(state, _E.REMOVED): _S.DEAD for state in GroupState},
}

#: Kafka's validPreviousStates, derived from ``TRANSITIONS``: the states each state may be entered from.
VALID_PREVIOUS_STATES: dict[GroupState, frozenset[GroupState]] = {
    target: frozenset(state for (state, _event), to in TRANSITIONS.items() if to is target) for target in GroupState
}


class IllegalGroupTransitionError(Exception):
    """A state change Kafka's coordinator never makes; a bug, not a client error."""


def next_state(group_id: str, state: GroupState, event: GroupEvent) -> GroupState:
    """The state ``event`` leads to from ``state``; raises IllegalGroupTransitionError when the table has none."""
    target = TRANSITIONS.get((state, event))
    if target is None:
        raise IllegalGroupTransitionError(f"{group_id}: {event.name} in state {state.value}")
    return target


def allows(state: GroupState, event: GroupEvent) -> bool:
    """Whether ``event`` is legal in ``state`` (``allows(s, PREPARE_REBALANCE)`` is Kafka's canRebalance)."""
    return (state, event) in TRANSITIONS


def loaded_state(has_members: bool) -> GroupState:
    """The state of a group read back from ``__consumer_offsets`` (Kafka's GroupMetadata.loadGroup)."""
    return GroupState.STABLE if has_members else GroupState.EMPTY


__all__ = [
    "TRANSITIONS",
    "VALID_PREVIOUS_STATES",
    "GroupEvent",
    "GroupState",
    "IllegalGroupTransitionError",
    "allows",
    "loaded_state",
    "next_state",
]
