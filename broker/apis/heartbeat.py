"""Heartbeat (12): keeps a member's session alive; tells it when a rebalance is under way."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    error = await broker.groups.heartbeat(body.group_id, body.generation_id, body.member_id, body.group_instance_id)
    return {"throttle_time_ms": 0, "error_code": error}
