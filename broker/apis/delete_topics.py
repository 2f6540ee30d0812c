"""DeleteTopics (20): each topic is answered once its groups' offsets and then the topic itself are gone.

v6+ (KIP-516) lists topics by name or by id, as Kafka's ControllerApis.deleteTopics takes them: an id no topic has
is UNKNOWN_TOPIC_ID, an entry with both a name and an id (or neither) is INVALID_REQUEST, and so is a name or id
listed twice (at every version, answered once); a deleted topic is answered with its name and id.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import TYPE_CHECKING

from oncelog.broker.metadata import ZERO_UUID
from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: The first DeleteTopics version listing topics as (name, id) entries.
MIN_TOPIC_ID_VERSION = 6


async def _delete(broker: Broker, name: str, topic_id: uuid.UUID) -> dict:
    """Delete topic ``name`` (asked for by ``topic_id``, or by name when it is ZERO_UUID)."""
    topic = broker.metadata.get(name)
    outcome = await broker.topics.delete(name)
    if outcome.error == ErrorCode.NONE and topic is not None:
        topic_id = topic.topic_id
    return {"name": name, "topic_id": topic_id, "error_code": outcome.error, "error_message": outcome.message}


def _refused(name: str | None, topic_id: uuid.UUID, error: ErrorCode, message: str | None = None) -> dict:
    return {"name": name, "topic_id": topic_id, "error_code": error, "error_message": message}


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    if request.version < MIN_TOPIC_ID_VERSION:
        entries = [(name, ZERO_UUID) for name in body.topic_names]
    else:
        entries = [(entry["name"], entry["topic_id"]) for entry in body.topics]
    # A name or id listed twice is refused, answered once (Kafka's duplicateProvidedNames / duplicateProvidedIds).
    by_name = Counter(name for name, topic_id in entries if name is not None and topic_id == ZERO_UUID)
    by_id = Counter(topic_id for name, topic_id in entries if name is None and topic_id != ZERO_UUID)
    answered: set[str | uuid.UUID] = set()
    responses = []
    for name, topic_id in entries:
        if name is not None and topic_id != ZERO_UUID:
            message = "You may not specify both topic name and topic id."
            responses.append(_refused(name, topic_id, ErrorCode.INVALID_REQUEST, message))
        elif name is None and topic_id == ZERO_UUID:
            message = "Neither topic name nor id were specified."
            responses.append(_refused(None, ZERO_UUID, ErrorCode.INVALID_REQUEST, message))
        elif name is not None and by_name[name] > 1:
            if name not in answered:
                answered.add(name)
                responses.append(_refused(name, ZERO_UUID, ErrorCode.INVALID_REQUEST, "Duplicate topic name."))
        elif name is None and by_id[topic_id] > 1:
            if topic_id not in answered:
                answered.add(topic_id)
                responses.append(_refused(None, topic_id, ErrorCode.INVALID_REQUEST, "Duplicate topic id."))
        elif name is None:
            topic = broker.metadata.by_id(topic_id)
            if topic is None:
                message = "This server does not host this topic ID."  # Kafka's Errors.UNKNOWN_TOPIC_ID message
                responses.append(_refused(None, topic_id, ErrorCode.UNKNOWN_TOPIC_ID, message))
            else:
                responses.append(await _delete(broker, topic.name, topic_id))
        else:
            responses.append(await _delete(broker, name, ZERO_UUID))
    return {"throttle_time_ms": 0, "responses": responses}
