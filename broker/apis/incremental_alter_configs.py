"""IncrementalAlterConfigs (44, KIP-339): SET, DELETE, APPEND and SUBTRACT a topic's config overrides."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.apis.alter_configs import alter_resources
from oncelog.broker.request import Request
from oncelog.broker.topic_configs import ConfigOp

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


def _ops(resource) -> list[ConfigOp]:
    return [ConfigOp(c.name, c.config_operation, c.value) for c in resource.configs]


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    responses = await alter_resources(broker, body.resources, _ops, incremental=True, validate_only=body.validate_only)
    return {"throttle_time_ms": 0, "responses": responses}
