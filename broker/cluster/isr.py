"""The leader's ISR changes (Kafka's AlterPartition) on a cluster: a compare-and-swap on the partition's key in etcd,
checked by ``partition_change.alter_isr`` against the state read there, so a leader that was replaced or whose state
is stale (an older partition epoch) is refused with Kafka's code and changes nothing. A broker's incarnation is the
etcd lease its registration lives under (a new process or session registers under a new lease, KIP-903's broker
epoch): the same transaction requires each joining broker's registration to hold the lease the leader saw it fetch
under and not to be in controlled shutdown (``Layout.shutting_down``, Kafka refuses those too), else
INELIGIBLE_REPLICA."""

from __future__ import annotations

from collections.abc import Mapping

from oncelog.broker.controller.partition_change import PartitionState, alter_isr
from oncelog.broker.controller.refused import Refused
from oncelog.broker.etcd.client import Compare, CompareTarget, EtcdClient, EtcdError, GuardFailed, KeyValue
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

    def incarnation_of(self, broker_id: int) -> int | None:
        """``broker_id``'s incarnation as this broker's image shows it: its registration's lease, None if absent."""
        return self._member.image.broker_leases.get(broker_id) or None

    async def alter_isr(
        self, topic: str, partition: int, proposed: PartitionState, joining: Mapping[int, int]
    ) -> PartitionState | Refused:
        """Store ``proposed.isr`` if ``proposed`` was computed from the current state (same leader, leader epoch and
        partition epoch) and each ``joining`` broker is registered under the lease given; the new state, or the
        refusal."""
        image: MetadataImage = self._member.image
        record = image.topics.get(topic)
        if record is None:
            return Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{topic} is not in the cluster's metadata")
        live = set(image.brokers)
        stale = sorted(b for b, lease in joining.items() if image.broker_leases.get(b) != lease)
        if stale:
            return _ineligible(stale)
        registered = [Compare(self._layout.broker(b), CompareTarget.LEASE, "==", lease) for b, lease in joining.items()]
        registered += [Compare.absent(self._layout.shutting_down(b)) for b in joining]

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
            stored, _revision = await self._client.update(
                self._layout.partition(record.topic_id, partition), change, guards=registered
            )
        except Refused as refused:
            return refused
        except GuardFailed:
            return _ineligible(sorted(joining))
        except EtcdError as exc:
            return Refused(ErrorCode.REQUEST_TIMED_OUT, f"etcd: {exc}")
        return PartitionState.from_json(stored)


def _ineligible(brokers: list[int]) -> Refused:
    return Refused(
        ErrorCode.INELIGIBLE_REPLICA,
        f"replicas {brokers} fetched as an incarnation that is no longer registered, or are in controlled shutdown, "
        "and cannot join the ISR",
    )
