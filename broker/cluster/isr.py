"""The leader's ISR changes (Kafka's AlterPartition) on a cluster: a compare-and-swap on the partition's key in etcd,
checked by ``partition_change.alter_isr`` against the state read there, so a leader that was replaced or whose state
is stale (an older partition epoch) is refused with Kafka's code and changes nothing."""

from __future__ import annotations

from oncelog.broker.controller.partition_change import PartitionState, alter_isr
from oncelog.broker.controller.refused import Refused
from oncelog.broker.etcd.client import EtcdClient, EtcdError, KeyValue
from oncelog.broker.etcd.image import MetadataImage
from oncelog.broker.etcd.layout import Layout
from oncelog.protocol.errors import ErrorCode

from .member import ClusterMember


class EtcdIsrUpdater:
    """``alter_isr`` for the leaders of this broker, against the cluster's etcd."""

    def __init__(self, client: EtcdClient, layout: Layout, member: ClusterMember, node_id: int) -> None:
        self._client = client
        self._layout = layout
        self._member = member
        self._node_id = node_id

    async def alter_isr(self, topic: str, partition: int, proposed: PartitionState) -> PartitionState | Refused:
        """Store ``proposed.isr`` if ``proposed`` was computed from the current state (same leader, leader epoch and
        partition epoch); the new state, or the refusal."""
        image: MetadataImage = self._member.image
        record = image.topics.get(topic)
        if record is None:
            return Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} is not in the cluster's metadata")
        live = set(image.brokers)

        def change(kv: KeyValue | None) -> bytes:
            if kv is None:
                raise Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} is gone")
            current = PartitionState.from_json(kv.value)
            return alter_isr(
                current,
                broker=self._node_id,
                leader_epoch=proposed.leader_epoch,
                partition_epoch=proposed.partition_epoch,
                new_isr=proposed.isr,
                live=live,
            ).to_json()

        try:
            stored, _revision = await self._client.update(self._layout.partition(record.topic_id, partition), change)
        except Refused as refused:
            return refused
        except EtcdError as exc:
            return Refused(ErrorCode.REQUEST_TIMED_OUT, f"etcd: {exc}")
        return PartitionState.from_json(stored)
