"""The role table (broker.replication.partitions) and the ISR proposals a leader makes (broker.replication.isr)."""

from __future__ import annotations

from oncelog.broker.controller.partition_change import NO_LEADER, PartitionState
from oncelog.broker.replication.isr import isr_proposals
from oncelog.broker.replication.partitions import PartitionRoles, Transition

TP = ("t", 0)


def state(leader: int, isr=(1, 2, 3), *, leader_epoch: int = 0, partition_epoch: int = 0) -> PartitionState:
    return PartitionState((1, 2, 3), tuple(isr), leader, leader_epoch, partition_epoch)


def apply(roles: PartitionRoles, s: PartitionState, *, end: int = 10, hw: int = 5, now: int = 0) -> Transition:
    return roles.apply(TP, s, log_end_offset=end, high_watermark=hw, now_ms=now)


def test_a_partition_without_state_is_led_alone() -> None:
    roles = PartitionRoles(1)
    assert roles.leads(TP) and roles.isr_size(TP) == 1 and roles.get(TP) is None


def test_leader_follower_and_stopped() -> None:
    roles = PartitionRoles(2)
    assert apply(roles, state(1)) is Transition.BECAME_FOLLOWER
    assert not roles.leads(TP) and roles.get(TP).follows == 1
    assert apply(roles, state(2, leader_epoch=1, partition_epoch=1)) is Transition.BECAME_LEADER
    role = roles.get(TP)
    assert roles.leads(TP) and role.follows is None and role.leading.high_watermark == 5
    assert set(role.leading.followers) == {1, 3}
    outside = PartitionState((1, 3), (1, 3), 1, 2, 2)
    assert apply(roles, outside) is Transition.STOPPED
    assert not roles.leads(TP) and roles.get(TP).follows is None


def test_no_leader_follows_nobody() -> None:
    roles = PartitionRoles(2)
    assert apply(roles, state(NO_LEADER)) is Transition.BECAME_FOLLOWER
    assert roles.get(TP).follows is None and not roles.leads(TP)


def test_stale_states_are_ignored_and_isr_changes_update() -> None:
    roles = PartitionRoles(1)
    apply(roles, state(1, leader_epoch=3, partition_epoch=7))
    assert apply(roles, state(2, leader_epoch=2, partition_epoch=9)) is Transition.IGNORED
    assert apply(roles, state(1, isr=(1, 2), leader_epoch=3, partition_epoch=6)) is Transition.IGNORED
    assert apply(roles, state(1, isr=(1, 2), leader_epoch=3, partition_epoch=8)) is Transition.UPDATED
    assert roles.get(TP).leading.isr == {1, 2} and roles.isr_size(TP) == 2


def test_adopt_only_under_the_same_leader_epoch_and_a_newer_partition_epoch() -> None:
    roles = PartitionRoles(1)
    apply(roles, state(1, leader_epoch=1, partition_epoch=1))
    assert not roles.adopt(TP, state(1, isr=(1,), leader_epoch=0, partition_epoch=2))
    assert not roles.adopt(TP, state(1, isr=(1,), leader_epoch=1, partition_epoch=1))
    assert roles.adopt(TP, state(1, isr=(1,), leader_epoch=1, partition_epoch=2))
    assert roles.isr_size(TP) == 1


def test_proposals_drop_the_lagging_and_add_the_caught_up() -> None:
    roles = PartitionRoles(1, lag_time_max_ms=1000)
    apply(roles, state(1, isr=(1, 2)), end=10, hw=10, now=0)
    leading = roles.get(TP).leading
    leading.record_fetch(3, 10, 10, now_ms=500)  # follower 3 caught up: joins
    leading.record_fetch(2, 4, 10, now_ms=500)  # follower 2 behind since the start: out after 1000 ms
    assert isr_proposals(roles, lambda _t, _p: 10, now_ms=900) == [("t", 0, state(1, isr=(1, 2, 3)))]
    assert isr_proposals(roles, lambda _t, _p: 10, now_ms=1100) == [("t", 0, state(1, isr=(1, 3)))]
