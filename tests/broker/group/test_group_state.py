"""The classic group state table (broker/group/state.py): Kafka's transitions and nothing else."""

from __future__ import annotations

import pytest
from oncelog.broker.group.metadata import Group
from oncelog.broker.group.state import (
    TRANSITIONS,
    VALID_PREVIOUS_STATES,
    GroupEvent,
    GroupState,
    IllegalGroupTransitionError,
    allows,
    loaded_state,
    next_state,
)

S = GroupState

#: Kafka's ClassicGroupState.validPreviousStates, written out.
KAFKA_VALID_PREVIOUS_STATES = {
    S.DEAD: set(S),
    S.COMPLETING_REBALANCE: {S.PREPARING_REBALANCE},
    S.STABLE: {S.COMPLETING_REBALANCE},
    S.PREPARING_REBALANCE: {S.STABLE, S.COMPLETING_REBALANCE, S.EMPTY},
    S.EMPTY: {S.PREPARING_REBALANCE},
}


def test_table_allows_exactly_kafkas_transitions() -> None:
    assert {state: set(previous) for state, previous in VALID_PREVIOUS_STATES.items()} == KAFKA_VALID_PREVIOUS_STATES
    reachable = {(state, target) for (state, _event), target in TRANSITIONS.items()}
    assert reachable == {(p, t) for t, previous in KAFKA_VALID_PREVIOUS_STATES.items() for p in previous}


def test_each_event_leads_where_the_coordinator_expects() -> None:
    assert next_state("g", S.EMPTY, GroupEvent.PREPARE_REBALANCE) is S.PREPARING_REBALANCE
    assert next_state("g", S.PREPARING_REBALANCE, GroupEvent.JOIN_COMPLETED) is S.COMPLETING_REBALANCE
    assert next_state("g", S.PREPARING_REBALANCE, GroupEvent.JOIN_COMPLETED_EMPTY) is S.EMPTY
    assert next_state("g", S.COMPLETING_REBALANCE, GroupEvent.ASSIGNMENT_STORED) is S.STABLE
    assert all(next_state("g", state, GroupEvent.REMOVED) is S.DEAD for state in S)
    # Kafka's canRebalance.
    assert {state for state in S if allows(state, GroupEvent.PREPARE_REBALANCE)} == {
        S.EMPTY,
        S.STABLE,
        S.COMPLETING_REBALANCE,
    }
    assert loaded_state(True) is S.STABLE and loaded_state(False) is S.EMPTY


@pytest.mark.parametrize(
    ("state", "event"),
    [
        (S.PREPARING_REBALANCE, GroupEvent.PREPARE_REBALANCE),
        (S.DEAD, GroupEvent.PREPARE_REBALANCE),
        (S.STABLE, GroupEvent.JOIN_COMPLETED),
        (S.EMPTY, GroupEvent.JOIN_COMPLETED_EMPTY),
        (S.PREPARING_REBALANCE, GroupEvent.ASSIGNMENT_STORED),
        (S.STABLE, GroupEvent.ASSIGNMENT_STORED),
    ],
)
def test_illegal_transition_raises_and_changes_nothing(state: GroupState, event: GroupEvent) -> None:
    group = Group("g", state=state, state_timestamp_ms=7)
    with pytest.raises(IllegalGroupTransitionError, match=f"g: {event.name} in state {state.value}"):
        group.apply(event, 99)
    assert group.state is state and group.state_timestamp_ms == 7


def test_apply_moves_and_stamps() -> None:
    group = Group("g", state_timestamp_ms=1)
    assert group.can_rebalance
    assert group.apply(GroupEvent.PREPARE_REBALANCE, 5) is S.PREPARING_REBALANCE
    assert group.state_timestamp_ms == 5 and not group.can_rebalance
