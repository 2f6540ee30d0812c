"""Metadata (3): the brokers, the controller, topics (auto-created on request) and their partitions' leaders,
replicas and ISR, from the cluster view (this node alone, or the etcd image on a cluster)."""

from __future__ import annotations

import uuid
from operator import itemgetter
from typing import TYPE_CHECKING

import trio
from oncelog.broker.authorized_operations import CLUSTER_OPERATIONS, OMITTED, TOPIC_OPERATIONS
from oncelog.broker.delay.topics import delay_topic_spec
from oncelog.broker.metadata import INTERNAL_TOPICS, TopicInfo, topic_name_problem
from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: Topics answered between two checkpoints, so a request naming many does not hold the event loop.
TOPICS_PER_CHECKPOINT = 256
#: Kafka's MetadataResponse.NO_LEADER_ID.
NO_LEADER_ID = -1
#: The leader epoch of a partition that does not exist yet (its creation is under way).
NO_LEADER_EPOCH = -1


def topic_entry(broker: Broker, topic: TopicInfo) -> dict:
    """The topic's metadata. A partition whose log does not exist yet (its creation is under way, or failed until
    the next start) is LEADER_NOT_AVAILABLE with leader -1, as Kafka reports a partition without a live leader, so
    clients wait and ask again instead of sending it requests."""
    return {
        "error_code": ErrorCode.NONE,
        "name": topic.name,
        "topic_id": topic.topic_id,
        "is_internal": topic.is_internal,
        "partitions": [_partition_entry(broker, topic.name, partition) for partition in range(topic.partitions)],
        "topic_authorized_operations": OMITTED,
    }


def _partition_entry(broker: Broker, topic: str, partition: int) -> dict:
    state = broker.cluster.partition(topic, partition)
    if state is None or state.leader == NO_LEADER_ID:
        replicas = list(state.replicas) if state else []
        return {
            "error_code": ErrorCode.LEADER_NOT_AVAILABLE,
            "partition_index": partition,
            "leader_id": NO_LEADER_ID,
            "leader_epoch": state.leader_epoch if state else NO_LEADER_EPOCH,
            "replica_nodes": replicas,
            "isr_nodes": list(state.isr) if state else [],
            "offline_replicas": replicas,
        }
    live = {b.node_id for b in broker.cluster.brokers(None)}
    return {
        "error_code": ErrorCode.NONE,
        "partition_index": partition,
        "leader_id": state.leader,
        "leader_epoch": state.leader_epoch,
        "replica_nodes": list(state.replicas),
        "isr_nodes": list(state.isr),
        "offline_replicas": [r for r in state.replicas if r not in live],
    }


def advertised_brokers(broker: Broker, listener: str | None) -> list[dict]:
    """The live brokers clients are told about: id, host and port advertised for the listener the request came in
    on (as Kafka answers), rack."""
    return [
        {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack} for b in broker.cluster.brokers(listener)
    ]


def error_entry(name: str, error: ErrorCode) -> dict:
    return {
        "error_code": error,
        "name": name,
        "is_internal": name in INTERNAL_TOPICS,
        "partitions": [],
        "topic_authorized_operations": OMITTED,
    }


def _unknown_id_entry(topic_id: uuid.UUID) -> dict:
    return {
        "error_code": ErrorCode.UNKNOWN_TOPIC_ID,
        "name": None,
        "topic_id": topic_id,
        "is_internal": False,
        "partitions": [],
        "topic_authorized_operations": OMITTED,
    }


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    requested = body.topics
    if requested is None or (request.version == 0 and not requested):
        topics = [topic_entry(broker, t) for t in broker.metadata.topics.values()]
    else:
        allow_create = body.allow_auto_topic_creation and broker.config.get_bool("auto.create.topics.enable")
        topics = []
        # Each topic once, as Kafka's handler answers the request's set of names: a topic named many times
        # does not multiply the response.
        # (Item access: a decoded struct's attribute access costs ten times more, too much for 100,000 names.)
        by_id = {t["topic_id"] for t in requested if t["name"] is None and t["topic_id"].int}
        if by_id:  # v10+: topics named by id (KIP-516), as KIP-848 consumers resolve their assignments
            named = {t.topic_id: t.name for t in broker.metadata.topics.values() if t.topic_id in by_id}
            topics.extend(topic_entry(broker, broker.metadata.topics[named[i]]) for i in by_id if i in named)
            topics.extend(_unknown_id_entry(i) for i in by_id if i not in named)
            requested = [t for t in requested if t["name"] is not None or not t["topic_id"].int]
        for looked_up, name in enumerate(dict.fromkeys(map(itemgetter("name"), requested))):
            if looked_up % TOPICS_PER_CHECKPOINT == TOPICS_PER_CHECKPOINT - 1:
                await trio.lowlevel.checkpoint()
            topic = broker.metadata.get(name) if name is not None else None
            if topic is not None:
                topics.append(topic_entry(broker, topic))
            elif name is None or topic_name_problem(name) is not None:
                topics.append(error_entry(name or "", ErrorCode.INVALID_TOPIC_EXCEPTION))
            elif (spec := delay_topic_spec(broker.config, name)) is not None:
                topics.append(topic_entry(broker, await broker.topics.ensure_internal(name, *spec)))
            elif allow_create and name not in INTERNAL_TOPICS:
                outcome = await broker.topics.create(name)
                if outcome.topic is not None:
                    topics.append(topic_entry(broker, outcome.topic))
                else:
                    topics.append(error_entry(name, outcome.error))
            else:
                topics.append(error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION))
    if body.include_topic_authorized_operations:  # v8+; without an authorizer Kafka answers every operation
        for entry in topics:
            entry["topic_authorized_operations"] = TOPIC_OPERATIONS
    return {
        "throttle_time_ms": 0,
        "brokers": advertised_brokers(broker, request.listener),
        "cluster_id": broker.metadata.cluster_id,
        "controller_id": broker.cluster.controller_id(),
        "topics": topics,
        "cluster_authorized_operations": CLUSTER_OPERATIONS if body.include_cluster_authorized_operations else OMITTED,
    }
