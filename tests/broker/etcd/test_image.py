"""The metadata image follows etcd: registrations, lease expiry, topics, partition changes, restarts, compaction."""

from __future__ import annotations

import uuid

import trio
from oncelog.broker.controller.partition_change import PartitionState, elect_leader
from oncelog.broker.etcd.client import EtcdClient
from oncelog.broker.etcd.connect import parse_etcd_connect
from oncelog.broker.etcd.election import Controller
from oncelog.broker.etcd.image import MetadataFollower, MetadataImage
from oncelog.broker.etcd.layout import BrokerRegistration, Layout, TopicRecord
from support.etcd import EtcdProcess


async def _until(follower: MetadataFollower, done: object, timeout_s: float = 10) -> MetadataImage:
    with trio.fail_after(timeout_s):
        image = follower.image
        while not done(image):  # type: ignore[operator]
            image = await follower.next_image(after=image.revision)
        return image


async def test_image_follows_the_cluster() -> None:
    with EtcdProcess() as etcd:
        layout = Layout(parse_etcd_connect(f"{etcd.endpoint}/clusters/one"))
        other = Layout(parse_etcd_connect(f"{etcd.endpoint}/clusters/other"))
        async with EtcdClient([etcd.url]) as client, trio.open_nursery() as nursery:
            await client.put(layout.cluster_id, b"cluster-1")
            follower = MetadataFollower(client, layout)
            first = await nursery.start(follower.run)
            assert first.cluster_id == "cluster-1" and not first.brokers

            lease = await client.grant_lease(30)
            registration = BrokerRegistration(1, {"PLAINTEXT": ("127.0.0.1", 9092)}, rack="r1")
            await client.put(layout.broker(1), registration.to_json(), lease=lease.id)
            await client.put(other.broker(2), registration.to_json())  # another cluster's root: not ours
            image = await _until(follower, lambda i: 1 in i.brokers)
            assert image.brokers == {1: registration}

            topic = TopicRecord("orders", str(uuid.uuid4()), 2, {"cleanup.policy": "compact"})
            state = PartitionState.new([1, 2, 3], {1, 2, 3})
            await client.put(layout.partition("left-by-a-lost-creation", 0), state.to_json())
            for index in range(2):
                await client.put(layout.partition(topic.topic_id, index), state.to_json())
            await client.put(layout.topic("orders"), topic.to_json())
            await client.put(layout.controller, b"1", lease=lease.id)
            image = await _until(follower, lambda i: "orders" in i.topics and i.controller is not None)
            assert image.topics["orders"] == topic
            assert set(image.topic_partitions()) == {("orders", 0), ("orders", 1)}  # the orphan belongs to no topic
            assert image.leader("orders", 1) == 1 and image.leader("orders", 9) == -1
            assert set(image.replicas_on(3)) == {("orders", 0), ("orders", 1)}
            assert image.controller == Controller(1, image.controller.epoch)

            await client.update(
                layout.partition(topic.topic_id, 0),
                lambda kv: elect_leader(PartitionState.from_json(kv.value), {2, 3}).to_json(),
            )
            image = await _until(follower, lambda i: i.leader("orders", 0) == 2)
            assert image.partition("orders", 0).leader_epoch == 1

            await client.revoke_lease(lease.id)  # the broker's session ends: registration and controller key go
            image = await _until(follower, lambda i: not i.brokers and i.controller is None)
            assert 2 not in image.brokers
            nursery.cancel_scope.cancel()


async def test_image_survives_an_etcd_restart_and_compaction() -> None:
    with EtcdProcess() as etcd:
        layout = Layout(parse_etcd_connect(f"{etcd.endpoint}/c"))
        async with EtcdClient([etcd.url], request_timeout_s=1) as client:
            follower = MetadataFollower(client, layout)
            async with trio.open_nursery() as nursery:
                await nursery.start(follower.run)
                await trio.to_thread.run_sync(etcd.restart)
                await client.put(layout.topic("a"), TopicRecord("a", "id-a", 1).to_json())
                await _until(follower, lambda i: "a" in i.topics)
                nursery.cancel_scope.cancel()

            # While the follower is stopped: a topic comes and another goes, and etcd compacts their history away.
            await client.put(layout.topic("b"), TopicRecord("b", "id-b", 1).to_json())
            await client.delete(layout.topic("a"))
            latest = await client.put(layout.cluster_id, b"c1")
            await client._call("/v3/kv/compaction", {"revision": str(latest), "physical": True})

            async with trio.open_nursery() as nursery:
                await nursery.start(follower.run)  # resumes from its old revision: compacted, so it reads again
                image = await _until(follower, lambda i: "b" in i.topics)
                assert set(image.topics) == {"b"} and image.cluster_id == "c1"
                nursery.cancel_scope.cancel()
