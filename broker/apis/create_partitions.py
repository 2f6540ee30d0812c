"""CreatePartitions (37): grow topics (Kafka's controller rules); a name given twice gets INVALID_REQUEST."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.broker.topics import TopicOutcome
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    counts = Counter(t.name for t in body.topics)
    results = []
    for name in (name for name, n in counts.items() if n > 1):
        # One answer per duplicated name, as Kafka's controller gives.
        results.append(_result(name, TopicOutcome(ErrorCode.INVALID_REQUEST, "Duplicate topic name.")))
    for topic in body.topics:
        if counts[topic.name] > 1:
            continue
        assignments = None if topic.assignments is None else [list(a.broker_ids) for a in topic.assignments]
        outcome = await broker.topics.create_partitions(
            topic.name, topic.count, assignments, validate_only=body.validate_only
        )
        results.append(_result(topic.name, outcome))
    return {"throttle_time_ms": 0, "results": results}


def _result(name: str, outcome: TopicOutcome) -> dict:
    return {"name": name, "error_code": outcome.error, "error_message": outcome.message}
