"""DeleteTopics (20): each topic is answered once its groups' offsets and then the topic itself are gone."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    responses = []
    for name in request.body.topic_names:
        outcome = await broker.topics.delete(name)
        responses.append({"name": name, "error_code": outcome.error, "error_message": outcome.message})
    return {"throttle_time_ms": 0, "responses": responses}
