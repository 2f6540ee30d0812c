"""The leader's bookkeeping of its followers: high watermark, falling out of sync, rejoining."""

from __future__ import annotations

from oncelog.broker.replication.leader_state import LeaderReplicaState

LAG = 30_000


def state(**overrides: object) -> LeaderReplicaState:
    fields: dict[str, object] = {
        "leader": 1,
        "replicas": [1, 2, 3],
        "isr": [1, 2, 3],
        "leader_epoch_start_offset": 0,
        "high_watermark": 0,
        "now_ms": 0,
        "lag_time_max_ms": LAG,
    }
    return LeaderReplicaState(**{**fields, **overrides})  # type: ignore[arg-type]


def test_high_watermark_is_the_smallest_end_in_the_isr_and_never_goes_back() -> None:
    leader = state()
    leader.record_fetch(2, 10, leader_end_offset=10, now_ms=1)
    assert not leader.advance_high_watermark(10)  # 3 has not fetched: its end is unknown, the HW cannot move
    leader.record_fetch(3, 7, leader_end_offset=10, now_ms=1)
    assert leader.advance_high_watermark(10) and leader.high_watermark == 7
    leader.isr_changed([1, 2])  # 3 dropped out: only 1 and 2 hold the HW
    assert leader.advance_high_watermark(10) and leader.high_watermark == 10
    leader.isr_changed([1, 2, 3])
    assert not leader.advance_high_watermark(10) and leader.high_watermark == 10  # never backwards


def test_a_follower_behind_for_longer_than_the_lag_falls_out_of_sync() -> None:
    leader = state()
    leader.record_fetch(2, 100, leader_end_offset=100, now_ms=1_000)  # caught up
    leader.record_fetch(3, 50, leader_end_offset=100, now_ms=1_000)  # behind since the start (t=0)
    assert leader.out_of_sync(100, now_ms=LAG) == set()
    assert leader.out_of_sync(100, now_ms=LAG + 1) == {3}
    # 2 keeps fetching up to where the leader was at its previous fetch: a steady stream keeps it in sync.
    for t in range(2_000, 80_000, 1_000):
        leader.record_fetch(2, 100 + t // 10 - 100, leader_end_offset=100 + t // 10, now_ms=t)
    assert 2 not in leader.out_of_sync(8_000, now_ms=80_000)


def test_a_follower_at_the_leaders_end_is_never_out_of_sync() -> None:
    leader = state()
    leader.record_fetch(2, 5, leader_end_offset=5, now_ms=0)
    assert 2 not in leader.out_of_sync(5, now_ms=10 * LAG)  # idle partition: nothing to fetch is not lagging


def test_rejoining_needs_the_high_watermark_and_this_epochs_start() -> None:
    leader = state(isr=[1, 2], leader_epoch_start_offset=40, high_watermark=30)
    leader.record_fetch(3, 35, leader_end_offset=50, now_ms=1)
    assert leader.ready_to_join(now_ms=2) == {}  # past the HW, but still before the epoch began
    leader.record_fetch(3, 45, leader_end_offset=50, now_ms=2)
    assert leader.ready_to_join(now_ms=2) == {3: 0}


def test_a_new_incarnation_forgets_the_old_ones_progress_and_joins_only_by_its_own_fetches() -> None:
    """KIP-903: broker 3 fetched everything as incarnation 7, then came back (wiped) as incarnation 8."""
    leader = state(isr=[1, 2], high_watermark=30)
    registered = {3: 7}
    leader.record_fetch(3, 30, leader_end_offset=30, now_ms=1, incarnation=7)
    assert leader.ready_to_join(now_ms=1, incarnation_of=registered.get) == {3: 7}
    del registered[3]  # its session ended: not registered, not proposed
    assert leader.ready_to_join(now_ms=2, incarnation_of=registered.get) == {}
    registered[3] = 8  # registered again: the old position does not count for the new incarnation
    assert leader.ready_to_join(now_ms=3, incarnation_of=registered.get) == {}
    leader.record_fetch(3, 0, leader_end_offset=30, now_ms=4, incarnation=8)
    assert leader.followers[3].log_end_offset == 0 and leader.followers[3].last_fetch_leader_end_offset == 30
    assert leader.ready_to_join(now_ms=4, incarnation_of=registered.get) == {}
    leader.record_fetch(3, 30, leader_end_offset=30, now_ms=5, incarnation=8)
    assert leader.ready_to_join(now_ms=5, incarnation_of=registered.get) == {3: 8}


def test_a_follower_that_stopped_fetching_is_not_proposed_after_the_lag_time() -> None:
    leader = state(isr=[1, 2], high_watermark=30)
    leader.record_fetch(3, 30, leader_end_offset=30, now_ms=1_000)
    assert leader.ready_to_join(now_ms=1_000 + LAG) == {3: 0}
    assert leader.ready_to_join(now_ms=1_001 + LAG) == {}


def test_an_idle_in_sync_fetch_is_noted_as_record_fetch_would_and_anything_else_is_left_to_it() -> None:
    registered = {2: 0, 3: 0}.get
    fast, full = state(), state()
    for leader in (fast, full):
        leader.record_fetch(2, 10, leader_end_offset=10, now_ms=1)
        leader.record_fetch(3, 4, leader_end_offset=10, now_ms=1)
    # Follower 2 again at the end (10), where it was: noted, as record_fetch notes it.
    assert fast.still_caught_up(2, 10, 10, 5_000, registered)
    full.record_fetch(2, 10, leader_end_offset=10, now_ms=5_000)
    assert fast.followers == full.followers
    # Anything that can move the high watermark or the ISR is not taken: a fetch behind the end, a first fetch at
    # a new end, a follower outside the ISR, another incarnation.
    assert not fast.still_caught_up(3, 4, 10, 6_000, registered)
    assert not fast.still_caught_up(2, 10, 12, 6_000, registered)
    assert not fast.still_caught_up(2, 12, 12, 6_000, registered)
    fast.isr_changed([1, 3])
    assert not fast.still_caught_up(2, 10, 10, 6_000, registered)
    fast.isr_changed([1, 2, 3])
    assert not fast.still_caught_up(2, 10, 10, 6_000, {2: 9}.get)
    assert fast.followers == full.followers  # refusals changed nothing
