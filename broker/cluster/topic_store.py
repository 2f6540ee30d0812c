"""Topic changes on a cluster: written to etcd (``etcd.topics``), answered once this broker's local state shows
them (``LocalFollower``), so a client that created a topic through this broker finds it here at once.

Each method raises ``Refused`` with Kafka's error code when etcd refuses the change (a topic created meanwhile by
another broker, too few brokers for the replication factor) and ``EtcdError`` when etcd cannot be reached.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from oncelog.broker.controller.refused import Refused
from oncelog.broker.etcd.client import Compare, EtcdClient, EtcdError, Put
from oncelog.broker.etcd.image import MetadataImage
from oncelog.broker.etcd.layout import Layout, TopicRecord
from oncelog.broker.etcd.topics import add_partitions, create_topic, delete_topic
from oncelog.protocol.errors import ErrorCode

from .local_follower import LocalFollower

#: How long a topic change may take to reach this broker's local state before the request is answered with
#: REQUEST_TIMED_OUT (the change stands; the client sees it on its next Metadata request).
APPLY_TIMEOUT_S = 30.0


class EtcdTopicStore:
    """CreateTopics, CreatePartitions, DeleteTopics and topic config changes of one cluster."""

    def __init__(self, client: EtcdClient, layout: Layout, local: LocalFollower) -> None:
        self._client = client
        self._layout = layout
        self._local = local

    def live_brokers(self) -> dict[int, str | None]:
        """Registered brokers not in controlled shutdown (id -> rack) as this broker last saw them: where new
        partitions go (Kafka's usable brokers skip those shutting down)."""
        image = self._local.applied
        return {broker_id: image.brokers[broker_id].rack for broker_id in sorted(image.active_brokers())}

    async def create(
        self, name: str, partitions: int, replication_factor: int, configs: Mapping[str, str]
    ) -> TopicRecord:
        record = await create_topic(
            self._client,
            self._layout,
            name=name,
            partitions=partitions,
            replication_factor=replication_factor,
            live_brokers=self.live_brokers(),
            configs=configs,
        )
        await self._until(lambda image: _same(image, record))
        return record

    async def add_partitions(self, name: str, total: int) -> TopicRecord:
        record = await add_partitions(
            self._client, self._layout, name=name, total=total, live_brokers=self.live_brokers()
        )
        await self._until(lambda image: _same(image, record))
        return record

    async def delete(self, name: str) -> None:
        record = await delete_topic(self._client, self._layout, name)
        await self._until(lambda image: getattr(image.topics.get(name), "topic_id", None) != record.topic_id)

    async def set_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace the topic's config overrides (a read-modify-write of its record)."""
        current = await self._client.get(self._layout.topic(name))
        if current is None:
            raise Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        record = TopicRecord.from_json(current.value)
        changed = TopicRecord(record.name, record.topic_id, record.partitions, dict(configs))
        if not (await self._client.txn([Compare.unchanged(current)], [Put(current.key, changed.to_json())])).succeeded:
            return await self.set_configs(name, configs)
        await self._until(lambda image: _same(image, changed))

    async def _until(self, done: Callable[[MetadataImage], bool]) -> None:
        if not await self._local.wait_applied(done, APPLY_TIMEOUT_S):
            raise EtcdError("the change was made in etcd but has not reached this broker yet")


def _same(image: MetadataImage, record: TopicRecord) -> bool:
    return image.topics.get(record.name) == record
