"""KIP-848 units: the uniform and range assignors, and the reconciliation state machine (revocation before
assignment, member epochs), without a broker."""

from __future__ import annotations

import itertools

import pytest
from oncelog.broker.group.assignors import MemberSpec, RangeAssignor, UniformAssignor
from oncelog.broker.group.consumer_group import (
    NEW_MEMBER,
    ConsumerGroup,
    ConsumerGroupState,
    ConsumerMember,
    MemberState,
    reconcile,
)


def _spec(*topics: str, current=()) -> MemberSpec:
    return MemberSpec(frozenset(topics), frozenset(current))


def _check_complete(result, members, partitions) -> None:
    """Each partition of a subscribed topic to exactly one member subscribed to it."""
    seen = [tp for tps in result.values() for tp in tps]
    assert len(seen) == len(set(seen))
    wanted = {(t, p) for m in members.values() for t in m.subscribed for p in range(partitions.get(t, 0))}
    assert set(seen) == wanted
    for m, tps in result.items():
        assert all(t in members[m].subscribed for t, _ in tps)


@pytest.mark.parametrize("count", [1, 2, 3, 5, 7])
@pytest.mark.parametrize("partitions", [1, 4, 10, 13])
def test_uniform_balances_identical_subscriptions(count: int, partitions: int) -> None:
    members = {f"m{i}": _spec("a", "b") for i in range(count)}
    result = UniformAssignor().assign(members, {"a": partitions, "b": 3})
    _check_complete(result, members, {"a": partitions, "b": 3})
    sizes = [len(v) for v in result.values()]
    assert max(sizes) - min(sizes) <= 1


def test_uniform_is_sticky_when_a_member_joins() -> None:
    before = UniformAssignor().assign({"m1": _spec("a"), "m2": _spec("a")}, {"a": 6})
    members = {m: _spec("a", current=tps) for m, tps in before.items()} | {"m3": _spec("a")}
    after = UniformAssignor().assign(members, {"a": 6})
    _check_complete(after, members, {"a": 6})
    assert [len(after[m]) for m in ("m1", "m2", "m3")] == [2, 2, 2]
    # Only what m3 needs moves: m1 and m2 keep two of their three each.
    assert after["m1"] <= before["m1"] and after["m2"] <= before["m2"]


def test_uniform_with_different_subscriptions_gives_each_topic_to_its_subscribers() -> None:
    members = {"m1": _spec("a"), "m2": _spec("a", "b"), "m3": _spec("b")}
    partitions = {"a": 4, "b": 4}
    result = UniformAssignor().assign(members, partitions)
    _check_complete(result, members, partitions)
    assert [len(result[m]) for m in ("m1", "m2", "m3")] in ([3, 2, 3], [3, 3, 2], [2, 3, 3])


def test_uniform_ignores_missing_topics_and_is_deterministic() -> None:
    members = {"b": _spec("x", "gone"), "a": _spec("x")}
    one = UniformAssignor().assign(members, {"x": 5})
    two = UniformAssignor().assign(dict(reversed(list(members.items()))), {"x": 5})
    assert one == two
    _check_complete(one, {"a": _spec("x"), "b": _spec("x")}, {"x": 5})


def test_range_gives_consecutive_ranges_per_topic_extra_to_the_first() -> None:
    members = {"m2": _spec("a", "b"), "m1": _spec("a", "b"), "m3": _spec("a")}
    result = RangeAssignor().assign(members, {"a": 7, "b": 3})
    assert result["m1"] == {("a", 0), ("a", 1), ("a", 2), ("b", 0), ("b", 1)}
    assert result["m2"] == {("a", 3), ("a", 4), ("b", 2)}
    assert result["m3"] == {("a", 5), ("a", 6)}


def _progress(epoch, assigned, revoking=(), state=MemberState.STABLE, previous=None):
    return NEW_MEMBER.__class__(
        epoch, epoch - 1 if previous is None else previous, state, frozenset(assigned), frozenset(revoking)
    )


def _never(_tp) -> bool:
    return False


def test_stable_member_at_target_epoch_is_unchanged() -> None:
    current = _progress(3, {("a", 0)})
    assert reconcile(current, frozenset({("a", 1)}), 3, None, _never) is current


def test_revocation_comes_before_assignment() -> None:
    current = _progress(3, {("a", 0), ("a", 1)})
    target = frozenset({("a", 1), ("a", 2)})
    step = reconcile(current, target, 4, frozenset({("a", 0), ("a", 1)}), _never)
    # Still epoch 3, keeps a-1 only, must give up a-0, gets nothing new yet.
    assert step == _progress(3, {("a", 1)}, {("a", 0)}, MemberState.UNREVOKED_PARTITIONS, previous=3)
    # While its heartbeat still lists a-0, nothing moves.
    assert reconcile(step, target, 4, frozenset({("a", 0), ("a", 1)}), _never) is step
    # Acknowledged: the next epoch, and a-2 now.
    done = reconcile(step, target, 4, frozenset({("a", 1)}), _never)
    assert done == _progress(4, {("a", 1), ("a", 2)}, (), MemberState.STABLE, previous=3)


def test_partition_held_by_another_member_is_not_given_until_released() -> None:
    held = {("a", 2)}
    current = _progress(3, {("a", 1)})
    target = frozenset({("a", 1), ("a", 2)})
    step = reconcile(current, target, 4, frozenset({("a", 1)}), lambda tp: tp in held)
    assert step == _progress(4, {("a", 1)}, (), MemberState.UNRELEASED_PARTITIONS, previous=3)
    held.clear()
    done = reconcile(step, target, 4, frozenset({("a", 1)}), lambda tp: tp in held)
    assert done == _progress(4, {("a", 1), ("a", 2)}, (), MemberState.STABLE, previous=4)


def test_member_that_does_not_report_owned_partitions_is_assumed_to_hold_them() -> None:
    step = reconcile(_progress(1, {("a", 0)}), frozenset(), 2, None, _never)
    assert step.state is MemberState.UNREVOKED_PARTITIONS


def test_member_not_owning_the_revoked_partitions_moves_on_at_once() -> None:
    step = reconcile(_progress(1, {("a", 0)}), frozenset({("a", 1)}), 2, frozenset(), _never)
    assert step == _progress(2, {("a", 1)}, (), MemberState.STABLE, previous=1)


def _member(group: ConsumerGroup, member_id: str, *topics: str) -> ConsumerMember:
    member = ConsumerMember(member_id, None, None, "c", "h", 1000, subscribed=topics)
    group.add(member)
    return member


def test_group_never_has_two_owners_of_a_partition_through_a_rebalance() -> None:
    """Drive the group as heartbeats would: a second member joins; at every step each partition has one holder."""
    group = ConsumerGroup("g")
    topics = {"a": 4}
    m1 = _member(group, "m1", "a")
    group.group_epoch += 1
    group.compute_target(UniformAssignor(), topics, {"m1": {"a"}})
    group.reconcile(m1, frozenset())
    assert m1.progress.assigned == {("a", p) for p in range(4)} and m1.epoch == 1
    m2 = _member(group, "m2", "a")
    group.group_epoch += 1
    group.compute_target(UniformAssignor(), topics, {"m1": {"a"}, "m2": {"a"}})
    assert group.state is ConsumerGroupState.RECONCILING
    owned = {"m1": frozenset(m1.progress.assigned), "m2": frozenset()}
    for _ in range(4):
        for m in (m2, m1):
            group.reconcile(m, owned[m.member_id])
            owned[m.member_id] = frozenset(m.progress.assigned)  # the client applies what it was told
            holders = [tp for x in (m1, m2) for tp in x.progress.assigned]
            assert len(holders) == len(set(holders))
    assert group.state is ConsumerGroupState.STABLE
    assert len(m1.progress.assigned) == len(m2.progress.assigned) == 2
    assert m1.epoch == m2.epoch == group.assignment_epoch == 2


def test_removed_member_releases_its_partitions() -> None:
    group = ConsumerGroup("g")
    m1 = _member(group, "m1", "a")
    group.set_progress(m1, _progress(1, {("a", 0), ("a", 1)}))
    assert set(group.owners) == {("a", 0), ("a", 1)}
    group.remove("m1")
    assert group.owners == {} and group.state is ConsumerGroupState.EMPTY


def test_static_member_replacement_keeps_epoch_and_partitions() -> None:
    group = ConsumerGroup("g")
    old = ConsumerMember("old", "inst", None, "c", "h", 1000, subscribed=("a",))
    group.add(old)
    group.set_progress(old, _progress(5, {("a", 0)}))
    group.target["old"] = frozenset({("a", 0)})
    new = group.replace_static(old, "new")
    assert group.static_members == {"inst": "new"} and list(group.members) == ["new"]
    assert new.epoch == 5 and group.owners == {("a", 0): ("new", 5)} and group.target == {"new": frozenset({("a", 0)})}


@pytest.mark.parametrize("members,partitions", list(itertools.product([2, 3, 4], [3, 8])))
def test_uniform_result_is_complete_for_mixed_subscriptions(members: int, partitions: int) -> None:
    specs = {f"m{i}": _spec(*(["a", "b"] if i % 2 else ["b", "c"])) for i in range(members)}
    counts = {"a": partitions, "b": partitions, "c": 2}
    _check_complete(UniformAssignor().assign(specs, counts), specs, counts)


def test_records_round_trip_and_drop_deleted_topics() -> None:
    """group_records -> rebuild_group gives the group back (partitions of a topic gone are dropped)."""
    import uuid

    from oncelog.broker.group.consumer_group_records import group_records, rebuild_group

    ids = {"a": uuid.uuid4(), "b": uuid.uuid4()}

    def by_topic_id(partitions):
        topics: dict[str, list[int]] = {}
        for t, p in partitions:
            topics.setdefault(t, []).append(p)
        return [{"topic_id": ids[t], "partitions": sorted(ps)} for t, ps in sorted(topics.items())]

    group = ConsumerGroup("g", group_epoch=7, assignment_epoch=7)
    m1 = ConsumerMember("m1", "i1", "r1", "c1", "h1", 3000, subscribed=("a", "b"), regex="x.*", server_assignor="range")
    group.add(m1)
    group.set_progress(m1, _progress(6, {("a", 0), ("b", 1)}, {("a", 1)}, MemberState.UNREVOKED_PARTITIONS, 5))
    group.target["m1"] = frozenset({("a", 0), ("b", 1), ("b", 2)})
    m2 = _member(group, "m2", "a")
    group.set_progress(m2, _progress(7, {("a", 2)}))
    records = group_records(group, by_topic_id)
    back = rebuild_group("g", records, {v: k for k, v in ids.items()})
    assert (back.group_epoch, back.assignment_epoch) == (7, 7)
    assert back.members["m1"] == m1 and back.members["m2"] == m2
    assert {m: t for m, t in back.target.items() if t} == group.target
    assert back.owners == group.owners and back.static_members == {"i1": "m1"}
    without_b = rebuild_group("g", records, {ids["a"]: "a"})
    assert without_b.members["m1"].progress.assigned == {("a", 0)}
    assert group_records(group, by_topic_id, only="m2").keys() < records.keys()
