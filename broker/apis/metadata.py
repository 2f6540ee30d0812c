"""Metadata (3): the brokers, the controller, topics (auto-created on request) and their partitions' leaders,
replicas and ISR, from the cluster view (this node alone, or the etcd image on a cluster).

Topic ids (KIP-516): every topic entry carries its id (v10+). A v12 request may name topics by id instead: then the
names are ignored, nothing is auto-created, and an id no topic has (the topic was deleted, or recreated under a new
id) is answered UNKNOWN_TOPIC_ID with a null name, as Kafka's handleTopicMetadataRequest answers. A v10-11 request
naming a topic by id or with a null name is INVALID_REQUEST for every topic it lists (Kafka throws
InvalidRequestException there, answered by MetadataRequest.getErrorResponse).
"""

from __future__ import annotations

import uuid
from operator import itemgetter
from typing import TYPE_CHECKING

import trio
from oncelog.broker.authorized_operations import CLUSTER_OPERATIONS, OMITTED, TOPIC_OPERATIONS
from oncelog.broker.delay.topics import delay_topic_spec
from oncelog.broker.metadata import INTERNAL_TOPICS, ZERO_UUID, TopicInfo, topic_name_problem
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
#: The first Metadata version whose requests may name topics by id (v10-11 declare the field but may not use it).
MIN_TOPIC_ID_LOOKUP_VERSION = 12
#: The first version whose topics carry an id field (v10-11 accept only the zero id and a name).
MIN_TOPIC_ID_FIELD_VERSION = 10


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


def creation_error(error: ErrorCode) -> ErrorCode:
    """How Metadata answers a topic it could not create on request: the refusal (INVALID_REPLICATION_FACTOR while
    too few brokers are live, INVALID_PARTITIONS, ...) as Kafka's auto-creation answers it, but LEADER_NOT_AVAILABLE
    (Kafka's answer while a creation is under way: ask again) when another broker's creation has not reached this
    one yet or etcd could not be reached. Never a dropped connection."""
    if error in (ErrorCode.TOPIC_ALREADY_EXISTS, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.LEADER_NOT_AVAILABLE
    return error


def unknown_id_entry(topic_id: uuid.UUID) -> dict:
    """The answer for an id no topic has: a null name, as Kafka answers it."""
    return {**error_entry("", ErrorCode.UNKNOWN_TOPIC_ID), "name": None, "topic_id": topic_id}


def _misuses_ids(request: Request) -> bool:
    """True for a v10-11 request naming a topic by id or with a null name (Kafka refuses it as a whole)."""
    return MIN_TOPIC_ID_FIELD_VERSION <= request.version < MIN_TOPIC_ID_LOOKUP_VERSION and any(
        t["name"] is None or t["topic_id"] != ZERO_UUID for t in request.body.topics
    )


def merge_listings(version: int, body) -> None:
    """Reduce the request in place to each listing once (name and id), in first-listed order: what the handler
    answers is the same, as it answers each name and each id once. v10-11 requests are left whole, since one that
    misuses ids is refused listing by listing. Pure; the server runs it in the worker thread that decoded a large
    request, so 90,000 listings are merged, and freed, off the event loop."""
    if body.topics is None or MIN_TOPIC_ID_FIELD_VERSION <= version < MIN_TOPIC_ID_LOOKUP_VERSION:
        return
    unique: dict[tuple[object, object], object] = {}
    for listing in body.topics:
        unique.setdefault((listing["name"], listing.get("topic_id")), listing)
    body.topics[:] = unique.values()


async def _missing_topic_entry(broker: Broker, name: str, allow_create: bool) -> dict:
    """The answer for a valid name no topic has: a delay topic is created on first use (whatever
    ``auto.create.topics.enable`` says), another topic if ``allow_create``; what could not be created is answered
    with ``creation_error``, what may not be, UNKNOWN_TOPIC_OR_PARTITION."""
    if (spec := delay_topic_spec(broker.config, name)) is not None:
        outcome = await broker.topics.create_internal(name, *spec)
    elif allow_create and name not in INTERNAL_TOPICS:
        outcome = await broker.topics.create(name)
    else:
        return error_entry(name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    if outcome.topic is None:
        return error_entry(name, creation_error(outcome.error))
    return topic_entry(broker, outcome.topic)


def _invalid_request(request: Request) -> dict:
    """Kafka's MetadataRequest.getErrorResponse for INVALID_REQUEST: each listed topic with the error."""
    return {
        "throttle_time_ms": 0,
        "brokers": [],
        "cluster_id": None,
        "controller_id": -1,
        "topics": [
            {**error_entry(t["name"] or "", ErrorCode.INVALID_REQUEST), "topic_id": t["topic_id"], "is_internal": False}
            for t in request.body.topics
        ],
        "cluster_authorized_operations": OMITTED,
    }


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    requested = body.topics
    ids = (
        dict.fromkeys(t["topic_id"] for t in requested if t["topic_id"] != ZERO_UUID)
        if requested and request.version >= MIN_TOPIC_ID_LOOKUP_VERSION
        else {}
    )
    if requested and _misuses_ids(request):
        return _invalid_request(request)
    if requested is None or (request.version == 0 and not requested):
        topics = [topic_entry(broker, t) for t in broker.metadata.topics.values()]
    elif ids:
        topics = []
        for looked_up, topic_id in enumerate(ids):
            if looked_up % TOPICS_PER_CHECKPOINT == TOPICS_PER_CHECKPOINT - 1:
                await trio.lowlevel.checkpoint()
            topic = broker.metadata.by_id(topic_id)
            topics.append(unknown_id_entry(topic_id) if topic is None else topic_entry(broker, topic))
    else:
        allow_create = body.allow_auto_topic_creation and broker.config.get_bool("auto.create.topics.enable")
        topics = []
        # Each topic once, as Kafka's handler answers the request's set of names: a topic named many times
        # does not multiply the response.
        # (Item access: a decoded struct's attribute access costs ten times more, too much for 100,000 names.)
        for looked_up, name in enumerate(dict.fromkeys(map(itemgetter("name"), requested))):
            if looked_up % TOPICS_PER_CHECKPOINT == TOPICS_PER_CHECKPOINT - 1:
                await trio.lowlevel.checkpoint()
            topic = broker.metadata.get(name) if name is not None else None
            if topic is not None:
                topics.append(topic_entry(broker, topic))
            elif name is None or topic_name_problem(name) is not None:
                topics.append(error_entry(name or "", ErrorCode.INVALID_TOPIC_EXCEPTION))
            else:
                topics.append(await _missing_topic_entry(broker, name, allow_create))
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
