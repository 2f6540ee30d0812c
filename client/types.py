"""Plain value types shared by the producer, consumer and admin client."""

from __future__ import annotations

from typing import NamedTuple


class TopicPartition(NamedTuple):
    topic: str
    partition: int


class OffsetAndMetadata(NamedTuple):
    offset: int
    metadata: str | None = None
    leader_epoch: int = -1


class RecordMetadata(NamedTuple):
    """Where a produced record landed."""

    topic: str
    partition: int
    offset: int
    timestamp: int


class ConsumerRecord(NamedTuple):
    """One fetched record. ``headers`` is a tuple of (key, value) pairs, ``()`` when there are none: a record holds
    no mutable object, so the garbage collector stops tracking it at its first pass (with a list per record the
    collector's full passes cost the consumer more than decoding did)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


class GroupMetadata(NamedTuple):
    """A consumer's group identity, as send_offsets_to_transaction needs it (KIP-447)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


class PartitionReplicas(NamedTuple):
    """A partition's leader, replicas (assignment order), in-sync replicas and replicas on brokers that are down."""

    partition: int
    leader: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]

    @property
    def under_replicated(self) -> bool:
        return len(self.isr) < len(self.replicas)


class BrokerNode(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


class ClusterDescription(NamedTuple):
    cluster_id: str | None
    controller: int
    brokers: tuple[BrokerNode, ...]
    #: ``{topic: [partition, ...]}`` of every topic, internal ones included.
    partitions: dict[str, list[PartitionReplicas]]
