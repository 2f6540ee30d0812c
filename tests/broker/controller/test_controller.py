"""The controller against a real etcd, with brokers stood in for by their registrations under leases."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import pytest
import trio
from oncelog.broker.controller.controller import ClusterController, controlled_shutdown
from oncelog.broker.controller.partition_change import PartitionState, alter_isr
from oncelog.broker.etcd.client import Compare, CompareTarget, EtcdClient, GuardFailed, Lease
from oncelog.broker.etcd.connect import parse_etcd_connect
from oncelog.broker.etcd.image import MetadataFollower, MetadataImage
from oncelog.broker.etcd.layout import BrokerRegistration, Layout
from oncelog.broker.etcd.topics import create_topic
from support.etcd import EtcdProcess


async def register(client: EtcdClient, layout: Layout, broker_id: int) -> Lease:
    lease = await client.grant_lease(30)
    registration = BrokerRegistration(broker_id, {"PLAINTEXT": ("127.0.0.1", 9000 + broker_id)})
    await client.put(layout.broker(broker_id), registration.to_json(), lease=lease.id)
    return lease


@dataclass
class Registered:
    """etcd holding brokers' registrations and a topic "t", with a follower of its metadata."""

    client: EtcdClient
    layout: Layout
    leases: dict[int, Lease]
    follower: MetadataFollower
    #: The follower's first image.
    image: MetadataImage
    nursery: trio.Nursery


@asynccontextmanager
async def registered(
    etcd: EtcdProcess, request: pytest.FixtureRequest, brokers: tuple[int, ...], partitions: int, factor: int
) -> AsyncIterator[Registered]:
    """``brokers`` registered under leases in a namespace of the test's own, topic "t" created over them, and a
    metadata follower running; everything started here stops when the block ends."""
    layout = Layout(parse_etcd_connect(f"{etcd.endpoint}/{request.node.name}"))
    async with EtcdClient([etcd.url]) as client, trio.open_nursery() as nursery:
        leases = {b: await register(client, layout, b) for b in brokers}
        await create_topic(
            client,
            layout,
            name="t",
            partitions=partitions,
            replication_factor=factor,
            live_brokers=dict.fromkeys(leases),
        )
        follower = MetadataFollower(client, layout)
        image = await nursery.start(follower.run)
        yield Registered(client, layout, leases, follower, image, nursery)
        nursery.cancel_scope.cancel()


async def until(follower: MetadataFollower, done: object, timeout_s: float = 15) -> MetadataImage:
    with trio.fail_after(timeout_s):
        image = follower.image
        while not done(image):  # type: ignore[operator]
            image = await follower.next_image(after=image.revision)
        return image


def led_by(image: MetadataImage, broker_id: int) -> list[tuple[str, int]]:
    return [tp for tp, state in image.topic_partitions().items() if state.leader == broker_id]


async def test_leaders_move_when_a_broker_dies_and_come_back_when_it_returns(
    etcd: EtcdProcess, request: pytest.FixtureRequest
) -> None:
    async with registered(etcd, request, (1, 2, 3), partitions=6, factor=3) as r:
        client, layout, leases, follower, nursery = r.client, r.layout, r.leases, r.follower, r.nursery
        controllers = {
            b: ClusterController(client, layout, follower, broker_id=b, lease_id=leases[b].id, rebalance_interval_s=0.3)
            for b in (1, 2, 3)
        }
        scopes = {b: trio.CancelScope() for b in controllers}

        async def run_controller(broker_id: int) -> None:
            with scopes[broker_id]:
                await controllers[broker_id].run()

        for broker_id in controllers:
            nursery.start_soon(run_controller, broker_id)
        before = await until(follower, lambda i: i.controller is not None)
        first_controller = before.controller.broker_id
        victim = first_controller  # the hardest case: the broker that dies is the controller
        lost = led_by(before, victim)
        assert len(lost) == 2

        scopes[victim].cancel()  # SIGKILL: the broker stops at once...
        await client.revoke_lease(leases[victim].id)  # ...and etcd sees its lease go
        after = await until(
            follower,
            lambda i: (
                i.controller is not None
                and i.controller.broker_id != victim
                and not led_by(i, victim)
                and all(victim not in s.isr for s in i.topic_partitions().values())
            ),
        )
        for tp in lost:
            assert after.partition(*tp).leader_epoch == before.partition(*tp).leader_epoch + 1
            assert after.partition(*tp).leader == next(r for r in before.partition(*tp).replicas if r != victim)

        # It comes back; each leader adds it to its ISR (AlterPartition); the rebalance gives its leaderships back.
        leases[victim] = await register(client, layout, victim)
        for (topic, index), state in after.topic_partitions().items():
            await client.update(
                layout.partition(after.topics[topic].topic_id, index),
                lambda kv, state=state: alter_isr(
                    PartitionState.from_json(kv.value),
                    broker=state.leader,
                    leader_epoch=state.leader_epoch,
                    partition_epoch=state.partition_epoch,
                    new_isr=[*state.isr, victim],
                    live={1, 2, 3},
                ).to_json(),
            )
        back = await until(follower, lambda i: sorted(led_by(i, victim)) == sorted(lost))
        assert all(len(s.isr) == 3 for s in back.topic_partitions().values())


async def test_a_deposed_controller_writes_nothing(etcd: EtcdProcess, request: pytest.FixtureRequest) -> None:
    async with registered(etcd, request, (1, 2), partitions=2, factor=2) as r:
        client, layout, leases, follower = r.client, r.layout, r.leases, r.follower
        stale = ClusterController(client, layout, follower, broker_id=1, lease_id=leases[1].id, auto_rebalance=False)
        await client.put(layout.controller, b"2", lease=leases[2].id)  # broker 2 is the controller now
        await client.revoke_lease(leases[1].id)  # broker 1 left: a controller would move its leaderships
        image = await until(follower, lambda i: 1 not in i.brokers)
        old_epoch = Compare(layout.controller, CompareTarget.CREATE, "==", 1)  # the epoch broker 1 once held
        with pytest.raises(GuardFailed):
            await stale.elect_leaders(image, old_epoch)
        assert led_by(await until(follower, lambda i: True), 1)  # nothing was written


async def test_controlled_shutdown_moves_everything_away(etcd: EtcdProcess, request: pytest.FixtureRequest) -> None:
    async with registered(etcd, request, (1, 2, 3), partitions=9, factor=3) as r:
        client, layout, follower = r.client, r.layout, r.follower
        image = r.image
        assert await controlled_shutdown(client, layout, image, 2) == 9
        after = await until(follower, lambda i: not led_by(i, 2))
        assert all(2 not in s.isr and len(s.isr) == 2 for s in after.topic_partitions().values())


async def test_no_broker_in_controlled_shutdown_is_elected(etcd: EtcdProcess, request: pytest.FixtureRequest) -> None:
    """Kafka's controller elects no broker in controlled shutdown (``isAcceptableLeader``): a partition whose only
    in-sync replica is shutting down stays without a leader, neither the election nor the preferred-leader rebalance
    hands it back; once the broker is active again (its mark gone: a new session deletes it) it is elected."""
    async with registered(etcd, request, (1, 2, 3), partitions=3, factor=1) as r:
        client, layout, leases, follower, nursery = r.client, r.layout, r.leases, r.follower, r.nursery
        await client.put(layout.shutting_down(2), b"", lease=leases[2].id)
        image = await until(follower, lambda i: 2 in i.shutting_down)
        (only_on_2,) = led_by(image, 2)
        assert await controlled_shutdown(client, layout, image, 2) == 1
        # The rebalance looks often: it must not hand the partition back either.
        controller = ClusterController(
            client, layout, follower, broker_id=1, lease_id=leases[1].id, rebalance_interval_s=0.1
        )
        nursery.start_soon(controller.run)
        image = await until(follower, lambda i: i.controller is not None and i.partition(*only_on_2).leader == -1)
        with trio.move_on_after(1.5):
            while True:
                image = await follower.next_image(after=image.revision)
                assert image.partition(*only_on_2).leader == -1, image.partition(*only_on_2)
        assert image.partition(*only_on_2).isr == (2,)  # the last member stays, to be elected cleanly when back

        await client.delete(layout.shutting_down(2))
        back = await until(follower, lambda i: i.partition(*only_on_2).leader == 2)
        assert back.partition(*only_on_2).isr == (2,)


async def test_a_rebalance_from_a_stale_image_skips_partitions_already_back_with_their_preferred_leader(
    etcd: EtcdProcess, request: pytest.FixtureRequest
) -> None:
    """The rebalance decides on an image; a partition it would move may be back with its preferred replica by the
    time it writes (another round, ElectLeaders): that change is skipped (ELECTION_NOT_NEEDED), the others made, and
    the controller goes on (before, the refusal ended the controller's task)."""
    async with registered(etcd, request, (1, 2), partitions=2, factor=2) as r:
        client, layout, leases, follower = r.client, r.layout, r.leases, r.follower
        image = r.image
        topic_id = image.topics["t"].topic_id

        async def set_leader(index: int, leader: int) -> None:
            def change(kv) -> bytes:
                state = PartitionState.from_json(kv.value)
                return PartitionState(
                    state.replicas, state.isr, leader, state.leader_epoch + 1, state.partition_epoch + 1
                ).to_json()

            await client.update(layout.partition(topic_id, index), change)

        for index in (0, 1):  # both led by their second replica, as after a failover
            state = image.partition("t", index)
            await set_leader(index, state.replicas[1])
        stale = await until(
            follower, lambda i: all(i.partition("t", p).leader != i.partition("t", p).replicas[0] for p in (0, 1))
        )
        await set_leader(0, stale.partition("t", 0).replicas[0])  # partition 0 is back already
        controller = ClusterController(
            client, layout, follower, broker_id=1, lease_id=leases[1].id, auto_rebalance=False
        )
        await controller.rebalance_leaders(stale, Compare.absent(layout.shutting_down(1)))
        now = await until(follower, lambda i: i.partition("t", 1).leader == i.partition("t", 1).replicas[0])
        assert now.partition("t", 0).leader == now.partition("t", 0).replicas[0]
        assert now.partition("t", 0).leader_epoch == stale.partition("t", 0).leader_epoch + 1  # written once, not twice
