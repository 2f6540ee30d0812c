"""Cluster metadata of a single node: cluster id, topics, their partition counts, ids and config overrides.

Persisted as JSON in the data dir (``meta.properties`` for the cluster id, ``topics.json`` for topics), each write
atomic and fsynced before the change is acknowledged.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from oncelog.storage.checkpoint import atomic_write

#: Kafka's Uuid.ZERO_UUID: "no topic id" in requests and responses that name topics by id (KIP-516).
ZERO_UUID = uuid.UUID(int=0)
#: Kafka's Topic.MAX_NAME_LENGTH.
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC_CHARS = re.compile(r"[a-zA-Z0-9._-]+")
TRANSACTION_STATE_TOPIC = "__transaction_state"
CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"
INTERNAL_TOPICS = frozenset({TRANSACTION_STATE_TOPIC, CONSUMER_OFFSETS_TOPIC})
#: The internal topics' fixed settings, as Kafka creates them: compacted (never deleted by age or size), with
#: 100 MiB segments (transaction.state.log.segment.bytes and offsets.topic.segment.bytes defaults). They apply
#: to topics created before a setting was added here too.
INTERNAL_TOPIC_CONFIGS: dict[str, dict[str, str]] = {
    name: {"cleanup.policy": "compact", "segment.bytes": "104857600"} for name in INTERNAL_TOPICS
}


#: Kafka 4.1's CreateTopics / CreatePartitions messages for a partition count or replication factor below 1.
NON_POSITIVE_PARTITIONS = "Number of partitions was set to an invalid non-positive value."
NON_POSITIVE_REPLICATION_FACTOR = "Replication factor must be larger than 0, or -1 to use the default value."


def topic_name_problem(name: str) -> str | None:
    """Why ``name`` is not a legal topic name (Kafka's Topic.validate, with Kafka 4.1's messages), or None."""
    if not name:
        return "Topic name is invalid: the empty string is not allowed"
    if name in (".", ".."):
        return f"Topic name is invalid: '{name}' is not allowed"
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        return (
            f"Topic name is invalid: the length of '{name}' is longer than the max allowed length "
            f"{MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL_TOPIC_CHARS.fullmatch(name):
        return (
            f"Topic name is invalid: '{name}' contains one or more characters other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


def collision_key(name: str) -> str:
    """Kafka treats '.' and '_' as colliding in topic names (metric names merge them)."""
    return name.replace(".", "_")


@dataclass
class TopicInfo:
    """One topic: id, partition count and its config overrides (topic-level property names)."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


class MetadataStore:
    """The topics this node holds; every mutation is persisted before it returns."""

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir
        self._topics_path = data_dir / "topics.json"
        self.topics: dict[str, TopicInfo] = {}
        #: The topics by id (KIP-516): a recreated topic's new id names it, its old id nothing.
        self._names_by_id: dict[uuid.UUID, str] = {}
        self.cluster_id = ""

    def load(self) -> None:
        """Read the cluster id (creating one on first start) and the topics."""
        self._data_dir.mkdir(parents=True, exist_ok=True)
        meta_path = self._data_dir / "meta.properties"
        if meta_path.exists():
            for line in meta_path.read_text().splitlines():
                key, _, value = line.partition("=")
                if key.strip() == "cluster.id":
                    self.cluster_id = value.strip()
        if not self.cluster_id:
            # Kafka's cluster ids are a random UUID in URL-safe base64 without padding (22 characters).
            self.cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
            atomic_write(meta_path, f"version=1\ncluster.id={self.cluster_id}\n".encode())
        if self._topics_path.exists():
            raw = json.loads(self._topics_path.read_text())
            for name, entry in raw["topics"].items():
                self.topics[name] = TopicInfo(name, uuid.UUID(entry["id"]), entry["partitions"], entry["configs"])
                self._names_by_id[self.topics[name].topic_id] = name

    def _save(self, topics: Mapping[str, TopicInfo] | None = None) -> None:
        """Write ``topics`` (default: the current ones) to topics.json, atomically and fsynced."""
        topics = self.topics if topics is None else topics
        payload = {
            "version": 1,
            "topics": {
                t.name: {"id": str(t.topic_id), "partitions": t.partitions, "configs": t.configs}
                for t in topics.values()
            },
        }
        atomic_write(self._topics_path, json.dumps(payload, indent=1, sort_keys=True).encode())

    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def by_id(self, topic_id: uuid.UUID) -> TopicInfo | None:
        """The topic whose id is ``topic_id``, or None (no topic ever had it, or it was deleted)."""
        name = self._names_by_id.get(topic_id)
        return None if name is None else self.topics.get(name)

    def has_partition(self, topic: str, partition: int) -> bool:
        """True when ``topic`` exists and has partition ``partition``."""
        info = self.topics.get(topic)
        return info is not None and 0 <= partition < info.partitions

    def colliding_topic(self, name: str) -> str | None:
        """An existing topic whose name collides with ``name`` ('.' vs '_'), if any."""
        key = collision_key(name)
        for existing in self.topics:
            if existing != name and collision_key(existing) == key:
                return existing
        return None

    def add(
        self, name: str, partitions: int, configs: Mapping[str, str], *, topic_id: uuid.UUID | None = None
    ) -> TopicInfo:
        """Add a topic with a new id (or ``topic_id``, the cluster's). Persisted before memory changes: if writing
        fails (OSError), nothing has changed."""
        info = TopicInfo(name, topic_id or uuid.uuid4(), partitions, dict(configs))
        self._save({**self.topics, name: info})
        self.topics[name] = info
        self._names_by_id[info.topic_id] = name
        return info

    def set_configs(self, name: str, configs: Mapping[str, str]) -> TopicInfo:
        """Replace the overrides of topic ``name``. Persisted before memory changes: if writing fails (OSError), nothing
        has changed."""
        topic = self.topics[name]
        self._save({**self.topics, name: TopicInfo(name, topic.topic_id, topic.partitions, dict(configs))})
        topic.configs = dict(configs)
        return topic

    def grow(self, name: str, partitions: int) -> TopicInfo:
        """Raise ``name``'s partition count to ``partitions``. Persisted before memory changes: if writing fails
        (OSError), nothing has changed."""
        topic = self.topics[name]
        if partitions <= topic.partitions:
            raise ValueError(f"{name} has {topic.partitions} partitions; {partitions} is no increase")
        self._save({**self.topics, name: TopicInfo(name, topic.topic_id, partitions, topic.configs)})
        topic.partitions = partitions
        return topic

    def remove(self, name: str) -> None:
        """Remove topic ``name``. Persisted before memory changes: if writing fails (OSError), nothing has changed."""
        self._save({t: info for t, info in self.topics.items() if t != name})
        self._names_by_id.pop(self.topics.pop(name).topic_id, None)
