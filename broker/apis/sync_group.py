"""SyncGroup (14): the leader hands in the assignment; every member receives its own."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    error, assignment, protocol_type, protocol_name = await broker.groups.sync_group(
        body.group_id,
        body.generation_id,
        body.member_id,
        body.group_instance_id,
        body.protocol_type,
        body.protocol_name,
        {a.member_id: bytes(a.assignment) for a in body.assignments},
    )
    return {
        "throttle_time_ms": 0,
        "error_code": error,
        "protocol_type": protocol_type,
        "protocol_name": protocol_name,
        "assignment": assignment,
    }
