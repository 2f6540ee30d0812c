"""Leases kept alive, lost leases noticed, and controller election, against a real etcd on loopback ports."""

from __future__ import annotations

import pytest
import trio
from oncelog.broker.etcd.client import EtcdClient
from oncelog.broker.etcd.election import Controller, ControllerElection
from oncelog.broker.etcd.session import EtcdSession, SessionLost
from support.etcd import EtcdProcess


@pytest.fixture
def key(request: pytest.FixtureRequest) -> str:
    return f"/test/{request.node.name}/controller"


async def test_a_kept_session_outlives_its_ttl_and_cancelling_it_revokes(etcd: EtcdProcess, key: str) -> None:
    async with EtcdClient([etcd.url]) as client:
        session = EtcdSession(client, session_timeout_ms=2000)
        lease = await session.start()
        await client.put(key, b"registered", lease=lease.id)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.run)
            await trio.sleep(4.5)  # more than two TTLs
            assert await client.get(key) is not None
            nursery.cancel_scope.cancel()
        assert await client.get(key) is None  # revoked at once, not after the TTL
        assert not session.lost.is_set()


async def test_a_lease_revoked_elsewhere_is_noticed(etcd: EtcdProcess) -> None:
    async with EtcdClient([etcd.url]) as client:
        session = EtcdSession(client, session_timeout_ms=3000)
        lease = await session.start()
        await client.revoke_lease(lease.id)
        with trio.fail_after(5), pytest.raises(SessionLost, match="expired"):
            await session.run()
        assert session.lost.is_set()


async def test_etcd_gone_longer_than_the_ttl_loses_the_session() -> None:
    with EtcdProcess() as server:
        async with EtcdClient([server.url], request_timeout_s=0.5) as client:
            session = EtcdSession(client, session_timeout_ms=2000)
            await session.start()
            server.kill()
            started = trio.current_time()
            with trio.fail_after(10), pytest.raises(SessionLost, match="no renewal"):
                await session.run()
            assert trio.current_time() - started >= 2  # not before a whole TTL without renewal


async def _campaigner(
    client: EtcdClient, key: str, broker_id: int, won: list[tuple[int, Controller]], sessions: dict[int, EtcdSession]
) -> None:
    session = EtcdSession(client, session_timeout_ms=10_000)
    lease = await session.start()
    sessions[broker_id] = session
    election = ControllerElection(client, key, broker_id=broker_id, lease_id=lease.id)
    won.append((broker_id, await election.campaign()))


async def test_one_controller_at_a_time_and_the_next_after_it_goes(etcd: EtcdProcess, key: str) -> None:
    async with EtcdClient([etcd.url]) as client:
        won: list[tuple[int, Controller]] = []
        sessions: dict[int, EtcdSession] = {}
        with trio.fail_after(15):
            async with trio.open_nursery() as nursery:
                for broker_id in (1, 2, 3):
                    nursery.start_soon(_campaigner, client, key, broker_id, won, sessions)
                while not won:
                    await trio.sleep(0.05)
                await trio.sleep(0.5)
                assert len(won) == 1  # the others wait
                first_id, first = won[0]
                assert first.broker_id == first_id
                observer = ControllerElection(client, key, broker_id=99, lease_id=0)
                assert await observer.current() == first

                # The controller's broker dies: its lease goes, one waiting candidate takes over with a later epoch.
                await client.revoke_lease(sessions[first_id].lease.id)
                while len(won) < 2:
                    await trio.sleep(0.05)
                second_id, second = won[1]
                assert second_id != first_id and second.epoch > first.epoch
                assert await observer.current() == second

                # Controlled shutdown: a non-holder cannot resign for it; the holder can, and the last one follows.
                assert not await observer.resign()
                holder = ControllerElection(client, key, broker_id=second_id, lease_id=sessions[second_id].lease.id)
                assert await holder.resign()
                while len(won) < 3:
                    await trio.sleep(0.05)
                assert won[2][1].epoch > second.epoch
                assert {b for b, _ in won} == {1, 2, 3}
        for session in sessions.values():
            await client.revoke_lease(session.lease.id)


async def test_campaign_again_with_the_same_lease_finds_itself(etcd: EtcdProcess, key: str) -> None:
    """A campaign retried after its answer was lost must not wait for itself."""
    async with EtcdClient([etcd.url]) as client:
        lease = await client.grant_lease(10)
        election = ControllerElection(client, key, broker_id=7, lease_id=lease.id)
        first = await election.campaign()
        with trio.fail_after(2):
            assert await election.campaign() == first
        await client.revoke_lease(lease.id)


async def test_partition_changes_through_update_refuse_a_stale_leader(etcd: EtcdProcess, key: str) -> None:
    """The AlterPartition path end to end: the state lives in etcd, each change is a guarded read-modify-write, and
    a leader whose view is older than the stored partition epoch is refused (INVALID_UPDATE_VERSION)."""
    from oncelog.broker.controller.partition_change import PartitionState, alter_isr, elect_leader
    from oncelog.broker.controller.refused import Refused
    from oncelog.protocol.errors import ErrorCode

    async with EtcdClient([etcd.url]) as client:
        await client.put(key, PartitionState.new([1, 2, 3], {1, 2, 3}).to_json())
        seen_by_leader = PartitionState.from_json((await client.get(key)).value)

        # The controller sees broker 3 die first: ISR shrinks, partition epoch moves on.
        await client.update(key, lambda kv: elect_leader(PartitionState.from_json(kv.value), {1, 2}).to_json())

        def leader_shrinks_to_1_and_3(kv: object) -> bytes:
            current = PartitionState.from_json(kv.value)  # type: ignore[attr-defined]
            return alter_isr(
                current,
                broker=1,
                leader_epoch=seen_by_leader.leader_epoch,
                partition_epoch=seen_by_leader.partition_epoch,
                new_isr=[1, 3],
                live={1, 2},
            ).to_json()

        with pytest.raises(Refused) as refused:
            await client.update(key, leader_shrinks_to_1_and_3)
        assert refused.value.error is ErrorCode.INVALID_UPDATE_VERSION
        assert PartitionState.from_json((await client.get(key)).value).isr == (1, 2)


async def test_campaigning_under_an_expired_lease_is_a_lost_session(etcd: EtcdProcess, key: str) -> None:
    async with EtcdClient([etcd.url]) as client:
        lease = await client.grant_lease(10)
        await client.revoke_lease(lease.id)
        with pytest.raises(SessionLost):
            await ControllerElection(client, key, broker_id=1, lease_id=lease.id).campaign()
