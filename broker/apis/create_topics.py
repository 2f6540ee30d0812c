"""CreateTopics (19): Kafka's validation (names, partitions, replication factor, configs, duplicates)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING

from oncelog.broker.apis.describe_configs import topic_config_entries
from oncelog.broker.request import Request
from oncelog.broker.topics import USE_BROKER_DEFAULT, TopicOutcome
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def _create(broker: Broker, topic, validate_only: bool) -> TopicOutcome:
    num_partitions, replication_factor = topic.num_partitions, topic.replication_factor
    if topic.assignments:
        if num_partitions != USE_BROKER_DEFAULT or replication_factor != USE_BROKER_DEFAULT:
            return TopicOutcome(
                ErrorCode.INVALID_REQUEST,
                "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at "
                "the same time.",
            )
        indexes = sorted(a.partition_index for a in topic.assignments)
        if indexes != list(range(len(indexes))):
            return TopicOutcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT, "Partitions must be numbered 0..n-1.")
        if any(list(a.broker_ids) != [broker.node_id] for a in topic.assignments):
            return TopicOutcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT, f"Only broker {broker.node_id} exists.")
        num_partitions, replication_factor = len(indexes), 1
    configs = {c.name: c.value for c in topic.configs}
    return await broker.topics.create(
        topic.name, num_partitions, replication_factor, configs, validate_only=validate_only
    )


#: The fields of a CreateTopics v5+ config entry (Kafka's CreatableTopicConfigs): a DescribeConfigs entry without
#: its synonyms, type and documentation.
CREATABLE_CONFIG_FIELDS = ("name", "value", "read_only", "config_source", "is_sensitive")


def _creatable_configs(broker: Broker, overrides: Mapping[str, str]) -> list[dict]:
    return [{f: entry[f] for f in CREATABLE_CONFIG_FIELDS} for entry in topic_config_entries(broker, overrides)]


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    counts = Counter(t.name for t in body.topics)
    results = []
    for topic in body.topics:
        if counts[topic.name] > 1:
            outcome = TopicOutcome(
                ErrorCode.INVALID_REQUEST, "Create topics request from client contains a duplicate topic."
            )
        else:
            outcome = await _create(broker, topic, body.validate_only)
        created = broker.metadata.get(topic.name) if outcome.error == ErrorCode.NONE else None
        results.append(
            {
                "name": topic.name,
                "topic_id": created.topic_id if created is not None else None,
                "error_code": outcome.error,
                "error_message": outcome.message,
                "num_partitions": created.partitions if created is not None else -1,
                "replication_factor": 1 if created is not None else -1,
                "configs": _creatable_configs(broker, created.configs) if created is not None else [],
            }
        )
    return {"throttle_time_ms": 0, "topics": results}
