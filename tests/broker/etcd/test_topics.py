"""Topics created, grown and deleted in etcd, seen through the metadata image."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import trio
from oncelog.broker.controller.refused import Refused
from oncelog.broker.etcd.client import EtcdClient
from oncelog.broker.etcd.connect import parse_etcd_connect
from oncelog.broker.etcd.image import MetadataFollower
from oncelog.broker.etcd.layout import Layout
from oncelog.broker.etcd.topics import add_partitions, create_topic, delete_topic
from oncelog.protocol.errors import ErrorCode
from support.etcd import EtcdProcess

BROKERS = {1: None, 2: None, 3: None}


@pytest.fixture
async def cluster(etcd: EtcdProcess, request: pytest.FixtureRequest) -> AsyncIterator[tuple[EtcdClient, Layout]]:
    layout = Layout(parse_etcd_connect(f"{etcd.endpoint}/{request.node.name}"))
    async with EtcdClient([etcd.url]) as client:
        yield client, layout


async def test_create_places_replicas_and_the_image_sees_the_whole_topic(cluster: tuple[EtcdClient, Layout]) -> None:
    client, layout = cluster
    follower = MetadataFollower(client, layout)
    async with trio.open_nursery() as nursery:
        await nursery.start(follower.run)
        record = await create_topic(
            client, layout, name="orders", partitions=300, replication_factor=3, live_brokers=BROKERS
        )  # more partitions than one etcd transaction may write
        with trio.fail_after(10):
            image = follower.image
            while "orders" not in image.topics:
                image = await follower.next_image(after=image.revision)
        nursery.cancel_scope.cancel()
    assert image.topics["orders"].topic_id == record.topic_id and len(record.topic_id) == 22
    partitions = image.topic_partitions()
    assert len(partitions) == 300
    for state in partitions.values():
        assert sorted(state.replicas) == [1, 2, 3] and state.isr == state.replicas and state.leader == state.replicas[0]
    leaders = [state.leader for state in partitions.values()]
    assert {b: leaders.count(b) for b in BROKERS} == {1: 100, 2: 100, 3: 100}


async def test_only_one_of_concurrent_creations_wins(cluster: tuple[EtcdClient, Layout]) -> None:
    client, layout = cluster
    outcomes: list[object] = []

    async def create(partitions: int) -> None:
        try:
            outcomes.append(
                await create_topic(
                    client, layout, name="t", partitions=partitions, replication_factor=2, live_brokers=BROKERS
                )
            )
        except Refused as refused:
            outcomes.append(refused.error)

    async with trio.open_nursery() as nursery:
        for partitions in (1, 2, 3, 200, 201):
            nursery.start_soon(create, partitions)
    winners = [o for o in outcomes if not isinstance(o, ErrorCode)]
    assert len(winners) == 1 and outcomes.count(ErrorCode.TOPIC_ALREADY_EXISTS) == 4
    kvs, _ = await client.get_prefix(layout.partitions)
    assert {kv.key.rsplit("/", 2)[1] for kv in kvs} == {winners[0].topic_id}  # losers removed what they wrote
    assert len(kvs) == winners[0].partitions


async def test_grow_delete_and_recreate_with_a_new_id(cluster: tuple[EtcdClient, Layout]) -> None:
    client, layout = cluster
    first = await create_topic(client, layout, name="t", partitions=2, replication_factor=2, live_brokers=BROKERS)
    grown = await add_partitions(client, layout, name="t", total=5, live_brokers=BROKERS)
    assert grown.partitions == 5 and grown.topic_id == first.topic_id
    kvs, _ = await client.get_prefix(layout.topic_partitions(first.topic_id))
    assert len(kvs) == 5
    for total, error in ((5, ErrorCode.INVALID_PARTITIONS), (3, ErrorCode.INVALID_PARTITIONS)):
        with pytest.raises(Refused) as refused:
            await add_partitions(client, layout, name="t", total=total, live_brokers=BROKERS)
        assert refused.value.error is error

    await delete_topic(client, layout, "t")
    assert (await client.get_prefix(layout.root))[0] == []
    again = await create_topic(client, layout, name="t", partitions=1, replication_factor=1, live_brokers=BROKERS)
    assert again.topic_id != first.topic_id


@pytest.mark.parametrize(
    ("partitions", "factor", "error"),
    [(0, 1, ErrorCode.INVALID_PARTITIONS), (1, 4, ErrorCode.INVALID_REPLICATION_FACTOR)],
)
async def test_refusals(cluster: tuple[EtcdClient, Layout], partitions: int, factor: int, error: ErrorCode) -> None:
    client, layout = cluster
    with pytest.raises(Refused) as refused:
        await create_topic(
            client, layout, name="t", partitions=partitions, replication_factor=factor, live_brokers=BROKERS
        )
    assert refused.value.error is error
    with pytest.raises(Refused) as unknown:
        await add_partitions(client, layout, name="nope", total=2, live_brokers=BROKERS)
    assert unknown.value.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    with pytest.raises(Refused) as unknown:
        await delete_topic(client, layout, "nope")
    assert unknown.value.error is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
