"""IsrMaintenance: proposals go to the controller, accepted ones are adopted, refused ones are not asked again for
that partition until its state changes or half a lag time has passed (a replica not yet alive: INELIGIBLE_RETRY_S)."""

from __future__ import annotations

import trio
from oncelog.broker.controller.partition_change import PartitionState
from oncelog.broker.controller.refused import Refused
from oncelog.broker.replication.isr import INELIGIBLE_RETRY_S, IsrMaintenance
from oncelog.broker.replication.partitions import PartitionRoles
from oncelog.protocol import ErrorCode
from support.isr_updater import InMemoryIsrUpdater

TP = ("t", 0)
STATE = PartitionState((1, 2, 3), (1, 2), 1)


class Refusing:
    def __init__(self, error: ErrorCode = ErrorCode.FENCED_LEADER_EPOCH) -> None:
        self.calls = 0
        self.error = error

    async def alter_isr(self, topic: str, partition: int, proposed: PartitionState) -> PartitionState | Refused:
        self.calls += 1
        return Refused(self.error, "refused")


def maintenance(roles: PartitionRoles, updater, now: list[int], lag_time_max_ms: int = 1000) -> IsrMaintenance:
    return IsrMaintenance(
        roles,
        updater,
        log_end_offset=lambda _t, _p: 10,
        adopt=lambda t, p, s: roles.adopt((t, p), s),
        clock_ms=lambda: now[0],
        lag_time_max_ms=lag_time_max_ms,
    )


async def test_an_accepted_expansion_is_adopted() -> None:
    roles = PartitionRoles(1, lag_time_max_ms=1000)
    roles.apply(TP, STATE, log_end_offset=10, high_watermark=10, now_ms=0)
    roles.get(TP).leading.record_fetch(3, 10, 10, now_ms=100)
    updater = InMemoryIsrUpdater([1, 2, 3])
    updater.set(*TP, STATE)
    await maintenance(roles, updater, [200]).check_once()
    assert roles.get(TP).state.isr == (1, 2, 3) and roles.get(TP).state.partition_epoch == 1
    assert updater.states[TP] == roles.get(TP).state


async def test_a_refused_change_is_not_asked_again_at_once(autojump_clock) -> None:
    roles = PartitionRoles(1, lag_time_max_ms=1000)
    roles.apply(TP, STATE, log_end_offset=10, high_watermark=10, now_ms=0)
    roles.get(TP).leading.record_fetch(3, 10, 10, now_ms=100)
    updater = Refusing()
    isr = maintenance(roles, updater, [200])
    for _ in range(5):
        await isr.check_once()
    assert updater.calls == 1
    await trio.sleep(0.6)  # half the lag time later
    await isr.check_once()
    assert updater.calls == 2
    roles.apply(TP, PartitionState((1, 2, 3), (1, 2), 1, 0, 5), log_end_offset=10, high_watermark=10, now_ms=300)
    roles.get(TP).leading.record_fetch(3, 10, 10, now_ms=300)
    await isr.check_once()  # a new state: proposed again at once
    assert updater.calls == 3


async def test_a_replica_not_yet_alive_in_the_leaders_image_is_asked_again_soon(autojump_clock) -> None:
    """A restarted follower fetches before its registration reaches the leader's image: the controller refuses
    (INELIGIBLE_REPLICA), and the leader asks again at a later fetch, not half a lag time (15 s by default) later."""
    roles = PartitionRoles(1, lag_time_max_ms=30000)
    roles.apply(TP, STATE, log_end_offset=10, high_watermark=10, now_ms=0)
    roles.get(TP).leading.record_fetch(3, 10, 10, now_ms=100)
    updater = Refusing(ErrorCode.INELIGIBLE_REPLICA)
    isr = maintenance(roles, updater, [200], lag_time_max_ms=30000)
    await isr.check_once()
    await isr.check_once()
    assert updater.calls == 1
    await trio.sleep(INELIGIBLE_RETRY_S)
    await isr.check_once()
    assert updater.calls == 2
