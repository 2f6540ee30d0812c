"""DescribeGroups (15): state, protocol and members of groups (unknown groups are reported Dead)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    return {"throttle_time_ms": 0, "groups": [_describe(broker, g) for g in request.body.groups]}


def _describe(broker: Broker, group_id: str) -> dict:
    """Kafka 4 answers GROUP_ID_NOT_FOUND for a KIP-848 group (ConsumerGroupDescribe describes it)."""
    if not broker.consumer_groups.is_consumer_group(group_id):
        return broker.groups.describe(group_id)
    return {
        "error_code": ErrorCode.GROUP_ID_NOT_FOUND,
        "group_id": group_id,
        "group_state": "Dead",
        "protocol_type": "",
        "protocol_data": "",
        "members": [],
    }
