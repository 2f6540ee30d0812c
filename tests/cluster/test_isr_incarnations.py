"""The etcd ISR updater (Kafka's AlterPartition on the controller) takes a follower into the ISR only as the
incarnation the leader saw it fetch as (KIP-903's broker epoch; here the lease of its registration), checked in the
same etcd transaction as the partition's state, so a leader whose image lags behind a re-registration is refused."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace

from oncelog.broker.cluster.isr import EtcdIsrUpdater
from oncelog.broker.controller.partition_change import PartitionState
from oncelog.broker.controller.refused import Refused
from oncelog.broker.etcd.client import EtcdClient
from oncelog.broker.etcd.connect import parse_etcd_connect
from oncelog.broker.etcd.image import MetadataImage
from oncelog.broker.etcd.layout import BrokerRegistration, Layout, TopicRecord
from oncelog.protocol import ErrorCode
from support.etcd import EtcdProcess

STATE = PartitionState(replicas=(1, 2, 3), isr=(1, 2), leader=1, leader_epoch=2, partition_epoch=5)


@dataclass
class Member:
    """The part of ``ClusterMember`` the updater reads: the image, as stale as the test makes it."""

    image: MetadataImage


async def test_a_follower_registered_again_since_its_fetch_is_refused_even_by_a_lagging_image() -> None:
    with EtcdProcess() as etcd:
        layout = Layout(parse_etcd_connect(f"{etcd.endpoint}/oncelog"))
        topic = TopicRecord("t", str(uuid.uuid4()), 1, {})
        registration = BrokerRegistration(3, {"PLAINTEXT": ("127.0.0.1", 9)})
        async with EtcdClient([etcd.url]) as client:
            await client.put(layout.partition(topic.topic_id, 0), STATE.to_json())
            old, new = await client.grant_lease(30), await client.grant_lease(30)
            await client.put(layout.broker(3), registration.to_json(), lease=new.id)  # 3 came back: a new lease
            member = Member(
                MetadataImage(
                    revision=1,
                    brokers={b: replace(registration, broker_id=b) for b in (1, 2, 3)},
                    broker_leases={1: 1, 2: 2, 3: old.id},  # this leader has not seen the re-registration yet
                    topics={"t": topic},
                )
            )
            updater = EtcdIsrUpdater(client, layout, member, 1)  # type: ignore[arg-type]
            proposed = replace(STATE, isr=(1, 2, 3))
            refused = await updater.alter_isr("t", 0, proposed, {3: old.id})
            assert isinstance(refused, Refused) and refused.error is ErrorCode.INELIGIBLE_REPLICA
            assert PartitionState.from_json((await client.get(layout.partition(topic.topic_id, 0))).value) == STATE

            # The leader's own image catching up is enough to refuse without a round trip ...
            member.image = replace(member.image, broker_leases={1: 1, 2: 2, 3: new.id})
            refused = await updater.alter_isr("t", 0, proposed, {3: old.id})
            assert isinstance(refused, Refused) and refused.error is ErrorCode.INELIGIBLE_REPLICA
            # ... and a fetch of the registered incarnation is accepted.
            stored = await updater.alter_isr("t", 0, proposed, {3: new.id})
            assert stored == replace(proposed, partition_epoch=6)
            assert PartitionState.from_json((await client.get(layout.partition(topic.topic_id, 0))).value) == stored
