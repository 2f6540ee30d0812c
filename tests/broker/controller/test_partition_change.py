"""Every change the controller makes to a partition's state, with Kafka's refusals."""

from __future__ import annotations

import pytest
from oncelog.broker.controller.partition_change import (
    NO_LEADER,
    PartitionState,
    alter_isr,
    elect_leader,
    elect_preferred,
    shut_down,
)
from oncelog.broker.controller.refused import Refused
from oncelog.protocol.errors import ErrorCode

ALL = {1, 2, 3}


def test_new_partition_leads_with_its_first_live_replica() -> None:
    assert PartitionState.new([2, 3, 1], ALL) == PartitionState((2, 3, 1), (2, 3, 1), 2, 0, 0)
    assert PartitionState.new([2, 3, 1], {1, 3}) == PartitionState((2, 3, 1), (3, 1), 3, 0, 0)


def test_json_round_trip() -> None:
    state = PartitionState((1, 2, 3), (1, 3), 3, 7, 12)
    assert PartitionState.from_json(state.to_json()) == state


def test_losing_the_leader_elects_the_next_in_sync_replica_in_assignment_order() -> None:
    state = PartitionState((1, 2, 3), (1, 2, 3), 1, 4, 9)
    after = elect_leader(state, {2, 3})
    assert after == PartitionState((1, 2, 3), (2, 3), 2, 5, 10)


def test_losing_a_follower_shrinks_the_isr_without_a_new_leader_epoch() -> None:
    state = PartitionState((1, 2, 3), (1, 2, 3), 1, 4, 9)
    assert elect_leader(state, {1, 3}) == PartitionState((1, 2, 3), (1, 3), 1, 4, 10)


def test_nothing_changed_is_the_same_state() -> None:
    state = PartitionState((1, 2, 3), (1, 2), 1, 4, 9)
    assert elect_leader(state, ALL) is state  # 3 is alive but out of sync: only the leader's AlterPartition adds it


def test_the_last_in_sync_replica_stays_in_the_isr_with_no_leader() -> None:
    state = PartitionState((1, 2, 3), (2,), 2, 4, 9)
    after = elect_leader(state, {1, 3})
    assert after.leader == NO_LEADER and after.isr == (2,) and after.leader_epoch == 5
    back = elect_leader(after, {1, 2, 3})
    assert back.leader == 2 and back.leader_epoch == 6  # clean: the last in-sync replica returns and leads


def test_unclean_election_only_when_enabled() -> None:
    state = PartitionState((1, 2, 3), (2,), 2, 4, 9)
    assert elect_leader(state, {3}).leader == NO_LEADER
    unclean = elect_leader(state, {3}, unclean=True)
    assert unclean.leader == 3 and unclean.isr == (3,) and unclean.leader_epoch == 5


def test_alter_isr_shrinks_and_expands_guarded_by_both_epochs() -> None:
    state = PartitionState((1, 2, 3), (1, 2, 3), 1, 4, 9)
    shrunk = alter_isr(state, broker=1, leader_epoch=4, partition_epoch=9, new_isr=[1, 3], live=ALL)
    assert shrunk == PartitionState((1, 2, 3), (1, 3), 1, 4, 10)
    expanded = alter_isr(shrunk, broker=1, leader_epoch=4, partition_epoch=10, new_isr=[3, 2, 1], live=ALL)
    assert expanded.isr == (1, 2, 3) and expanded.partition_epoch == 11


@pytest.mark.parametrize(
    ("request_fields", "error"),
    [
        ({"broker": 2}, ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ({"leader_epoch": 3}, ErrorCode.FENCED_LEADER_EPOCH),
        ({"partition_epoch": 8}, ErrorCode.INVALID_UPDATE_VERSION),  # computed from an older state
        ({"new_isr": [2, 3]}, ErrorCode.INVALID_REQUEST),  # without the leader
        ({"new_isr": [1, 4]}, ErrorCode.INVALID_REQUEST),  # not a replica
        ({"new_isr": [1, 1]}, ErrorCode.INVALID_REQUEST),
        ({"new_isr": [1, 3], "live": {1, 2}}, ErrorCode.INELIGIBLE_REPLICA),  # 3 is dead and not in sync
    ],
)
def test_alter_isr_refusals(request_fields: dict[str, object], error: ErrorCode) -> None:
    state = PartitionState((1, 2, 3), (1, 2), 1, 4, 9)
    fields: dict[str, object] = {
        "broker": 1,
        "leader_epoch": 4,
        "partition_epoch": 9,
        "new_isr": [1, 2, 3],
        "live": ALL,
        **request_fields,
    }
    with pytest.raises(Refused) as refused:
        alter_isr(state, **fields)  # type: ignore[arg-type]
    assert refused.value.error is error


def test_preferred_election() -> None:
    moved = PartitionState((1, 2, 3), (1, 2, 3), 2, 4, 9)
    assert elect_preferred(moved, ALL) == PartitionState((1, 2, 3), (1, 2, 3), 1, 5, 10)
    with pytest.raises(Refused) as not_needed:
        elect_preferred(PartitionState((1, 2, 3), (1, 2, 3), 1, 4, 9), ALL)
    assert not_needed.value.error is ErrorCode.ELECTION_NOT_NEEDED
    with pytest.raises(Refused) as unavailable:
        elect_preferred(PartitionState((1, 2, 3), (2, 3), 2, 4, 9), ALL)
    assert unavailable.value.error is ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE


def test_controlled_shutdown_moves_leadership_and_leaves_the_isr() -> None:
    state = PartitionState((1, 2, 3), (1, 2, 3), 1, 4, 9)
    after = shut_down(state, 1, ALL)
    assert after == PartitionState((1, 2, 3), (2, 3), 2, 5, 10)
    follower = shut_down(state, 3, ALL)
    assert follower == PartitionState((1, 2, 3), (1, 2), 1, 4, 10)
    alone = PartitionState((1, 2, 3), (1,), 1, 4, 9)
    assert shut_down(alone, 1, ALL).isr == (1,)  # the last in-sync replica is kept, the partition goes offline
    assert shut_down(alone, 1, ALL).leader == NO_LEADER
