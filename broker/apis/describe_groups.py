"""DescribeGroups (15): state, protocol and members of groups (unknown groups are reported Dead)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    return {"throttle_time_ms": 0, "groups": [broker.groups.describe(g) for g in request.body.groups]}
