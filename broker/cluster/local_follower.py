"""Makes this broker's local state follow the cluster's metadata image: its topics (mirrored into the local
``MetadataStore``, so every component reads topics the same way as on a single node), the logs of the partitions it
holds a replica of, and each of those replicas' role (leader or follower, at which epoch).

Every image is applied whole and in revision order by one task; ``wait_applied`` lets a request that changed etcd
(CreateTopics, say) answer only once this broker's state shows the change.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Awaitable, Callable
from typing import Protocol

import structlog
import trio
from oncelog.broker.clock import now_ms
from oncelog.broker.controller.partition_change import PartitionState
from oncelog.broker.etcd.image import MetadataFollower, MetadataImage
from oncelog.broker.etcd.layout import TopicRecord
from oncelog.broker.metadata import MetadataStore, TopicInfo

log = structlog.get_logger(__name__)


def topic_uuid(topic_id: str) -> uuid.UUID:
    """The UUID of a topic id in Kafka's text form (URL-safe base64 of its 16 bytes, no padding)."""
    return uuid.UUID(bytes=base64.urlsafe_b64decode(topic_id + "=" * (-len(topic_id) % 4)))


class LocalTopics(Protocol):
    """What the follower needs of the topic manager: mirror a topic locally, make logs, remove a topic here."""

    async def mirror(self, topic: TopicInfo, local_partitions: list[int]) -> None: ...

    async def remove_local(self, name: str) -> None: ...


class LocalCredentials(Protocol):
    def replace(self, payload: bytes) -> None: ...


class LocalReplicas(Protocol):
    def apply_partition_state(self, topic: str, partition: int, state: PartitionState, *, now_ms: int) -> object: ...


class LocalFollower:
    """Applies each new image to this broker; run it for the broker's lifetime."""

    def __init__(
        self,
        node_id: int,
        follower: MetadataFollower,
        metadata: MetadataStore,
        topics: LocalTopics,
        replicas: LocalReplicas,
        credentials: LocalCredentials,
        *,
        on_applied: Callable[[MetadataImage], Awaitable[None]] | None = None,
    ) -> None:
        self._node_id = node_id
        self._follower = follower
        self._metadata = metadata
        self._topics = topics
        self._replicas = replicas
        self._credentials = credentials
        self._on_applied = on_applied
        self.applied = MetadataImage()
        self._changed = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Apply the current image, report started, then every newer one until cancelled."""
        image = self._follower.image
        await self._apply(image)
        task_status.started()
        while True:
            image = await self._follower.next_image(after=image.revision)
            await self._apply(image)

    async def wait_applied(self, done: Callable[[MetadataImage], bool], timeout_s: float) -> bool:
        """Wait until an applied image satisfies ``done``; False if none did within ``timeout_s``."""
        with trio.move_on_after(timeout_s):
            while not done(self.applied):
                await self._changed.wait()
            return True
        return False

    async def _apply(self, image: MetadataImage) -> None:
        if image.scram_credentials is not None and image.scram_credentials != self.applied.scram_credentials:
            # The cluster's credentials replace this broker's (until first altered on the cluster, each broker
            # keeps those of its data dir, e.g. written by `oncelog add-scram`).
            self._credentials.replace(image.scram_credentials)
        for name, local in list(self._metadata.topics.items()):
            record = image.topics.get(name)
            if record is None or topic_uuid(record.topic_id) != local.topic_id:
                await self._topics.remove_local(name)
        held = image.replicas_on(self._node_id)
        for record in image.topics.values():
            await self._topics.mirror(_topic_info(record), sorted(p for (t, p) in held if t == record.name))
        now = now_ms()
        # Leaderships first: a follower told to fetch from this broker finds it leading.
        for (topic, partition), state in sorted(held.items(), key=lambda item: item[1].leader != self._node_id):
            try:
                self._replicas.apply_partition_state(topic, partition, state, now_ms=now)
            except LookupError:
                log.error("replica_without_log", topic=topic, partition=partition)
        self.applied = image
        if self._on_applied is not None:
            await self._on_applied(image)
        self._changed.set()
        self._changed = trio.Event()


def _topic_info(record: TopicRecord) -> TopicInfo:
    return TopicInfo(record.name, topic_uuid(record.topic_id), record.partitions, dict(record.configs))
