"""Every broker's view of the cluster: an immutable image of what etcd holds, kept current by one watch.

``MetadataFollower.run`` reads every key under the cluster's root once, then watches from the next revision and
applies each revision's changes to a new image. A watch that breaks (etcd restarted, endpoint lost) resumes after the
last revision applied; one whose revision etcd compacted away reads everything again. Readers never see a half-applied
revision: the image is replaced whole. Components wait for the next image with ``next_image(after=revision)`` and
act on the difference (become leader or follower, load a coordinator partition); they never guess.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

import structlog
import trio
from oncelog.broker.controller.partition_change import NO_LEADER, PartitionState

from .client import EtcdClient, EtcdError, KeyValue, WatchCompacted
from .election import Controller
from .layout import BrokerRegistration, Layout, TopicRecord

log = structlog.get_logger(__name__)

#: After a broken watch, wait this long before watching again (etcd restarting, or unreachable).
WATCH_RETRY_S = 0.5


def _frozen(mapping: dict) -> Mapping:  # type: ignore[type-arg]
    return MappingProxyType(mapping)


@dataclass(frozen=True)
class MetadataImage:
    """The cluster at one etcd revision."""

    revision: int = 0
    cluster_id: str | None = None
    #: Every SCRAM credential of the cluster (``sasl.credentials.encode_credentials``), None until first altered.
    scram_credentials: bytes | None = None
    controller: Controller | None = None
    brokers: Mapping[int, BrokerRegistration] = field(default_factory=lambda: _frozen({}))
    #: The etcd lease each registered broker's session holds (its registration goes with it).
    broker_leases: Mapping[int, int] = field(default_factory=lambda: _frozen({}))
    #: Brokers that marked themselves in controlled shutdown (``Layout.shutting_down``).
    shutting_down: frozenset[int] = frozenset()
    topics: Mapping[str, TopicRecord] = field(default_factory=lambda: _frozen({}))
    #: Keyed by (topic id, partition): see ``layout`` for why ids, not names.
    partitions: Mapping[tuple[str, int], PartitionState] = field(default_factory=lambda: _frozen({}))

    def active_brokers(self) -> set[int]:
        """The brokers that may lead and join new partitions: registered and not in controlled shutdown (Kafka's
        ``ClusterControlManager.isActive``: its controller never elects a broker in controlled shutdown)."""
        return {broker_id for broker_id in self.brokers if broker_id not in self.shutting_down}

    def partition(self, topic: str, index: int) -> PartitionState | None:
        """The state of partition ``index`` of the topic named ``topic`` now, or None."""
        record = self.topics.get(topic)
        return self.partitions.get((record.topic_id, index)) if record else None

    def leader(self, topic: str, index: int) -> int:
        """The partition's leader, or ``NO_LEADER`` (also for a partition the image does not know)."""
        state = self.partition(topic, index)
        return state.leader if state else NO_LEADER

    def topic_partitions(self) -> dict[tuple[str, int], PartitionState]:
        """Every partition of every topic, by (topic name, partition); partitions of no topic are left out."""
        return {
            (record.name, index): state
            for record in self.topics.values()
            for index in range(record.partitions)
            if (state := self.partitions.get((record.topic_id, index))) is not None
        }

    def replicas_on(self, broker_id: int) -> dict[tuple[str, int], PartitionState]:
        """The partitions ``broker_id`` holds a replica of, by (topic name, partition)."""
        return {tp: state for tp, state in self.topic_partitions().items() if broker_id in state.replicas}


class MetadataFollower:
    """Owns the current ``image``; run it in the nursery of the broker's lifetime."""

    def __init__(self, client: EtcdClient, layout: Layout) -> None:
        self._client = client
        self._layout = layout
        self.image = MetadataImage()
        self._changed = trio.Event()

    async def run(self, *, task_status: trio.TaskStatus[MetadataImage] = trio.TASK_STATUS_IGNORED) -> None:
        """Load (unless an earlier run left an image to resume from), report the image through ``task_status``,
        then follow etcd until cancelled."""
        if self.image.revision == 0:
            await self._load()
        task_status.started(self.image)
        while True:
            try:
                async for batch in self._client.watch(self._layout.root, start_revision=self.image.revision + 1):
                    self._apply(batch.revision, [(e.kv, e.deleted) for e in batch.events])
            except WatchCompacted:
                log.warning("etcd compacted past the image's revision; reading the cluster again")
                await self._load()
            except EtcdError as exc:
                log.warning("etcd watch broke; resuming", error=str(exc), revision=self.image.revision)
                await trio.sleep(WATCH_RETRY_S)

    async def next_image(self, *, after: int) -> MetadataImage:
        """The first image newer than revision ``after`` (at once if the current one is)."""
        while self.image.revision <= after:
            await self._changed.wait()
        return self.image

    async def _load(self) -> None:
        while True:
            try:
                kvs, revision = await self._client.get_prefix(self._layout.root)
                break
            except EtcdError as exc:
                log.warning("etcd unreachable while reading the cluster; retrying", error=str(exc))
                await trio.sleep(WATCH_RETRY_S)
        self.image = MetadataImage()
        self._apply(revision, [(kv, False) for kv in kvs])

    def _apply(self, revision: int, changes: list[tuple[KeyValue, bool]]) -> None:
        image = self.image
        brokers, topics, partitions = dict(image.brokers), dict(image.topics), dict(image.partitions)
        leases = dict(image.broker_leases)
        shutting_down = set(image.shutting_down)
        cluster_id, controller, scram = image.cluster_id, image.controller, image.scram_credentials
        for kv, deleted in changes:
            path = kv.key[len(self._layout.root) :].split("/")
            match path:
                case ["cluster_id"]:
                    cluster_id = None if deleted else kv.value.decode()
                case ["controller"]:
                    controller = None if deleted else Controller.from_kv(kv)
                case ["scram_credentials"]:
                    scram = None if deleted else kv.value
                case ["brokers", broker_id]:
                    if deleted:
                        brokers.pop(int(broker_id), None)
                        leases.pop(int(broker_id), None)
                    else:
                        brokers[int(broker_id)] = BrokerRegistration.from_json(kv.value)
                        leases[int(broker_id)] = kv.lease
                case ["shutting_down", broker_id]:
                    if deleted:
                        shutting_down.discard(int(broker_id))
                    else:
                        shutting_down.add(int(broker_id))
                case ["topics", name]:
                    if deleted:
                        topics.pop(name, None)
                    else:
                        topics[name] = TopicRecord.from_json(kv.value)
                case ["partitions", topic_id, index]:
                    if deleted:
                        partitions.pop((topic_id, int(index)), None)
                    else:
                        partitions[(topic_id, int(index))] = PartitionState.from_json(kv.value)
                case _:
                    pass  # keys no broker follows (the producer id block) are not part of the image
        self.image = replace(
            image,
            revision=max(revision, image.revision),
            cluster_id=cluster_id,
            controller=controller,
            scram_credentials=scram,
            brokers=_frozen(brokers),
            broker_leases=_frozen(leases),
            shutting_down=frozenset(shutting_down),
            topics=_frozen(topics),
            partitions=_frozen(partitions),
        )
        self._changed.set()
        self._changed = trio.Event()
