"""LeaveGroup (13): members leave (v3+: a batch, static members by group instance id)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: The first version that leaves a list of members (KIP-345).
BATCHED_SINCE = 3


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    if request.version >= BATCHED_SINCE:
        leaving = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        leaving = [(body.member_id, None)]
    error, member_errors = await broker.groups.leave_group(body.group_id, leaving)
    if request.version < BATCHED_SINCE:
        # One member: its error is the response's error (Kafka's LeaveGroupResponse for old versions).
        if error == ErrorCode.NONE and member_errors:
            error = member_errors[0]
        return {"throttle_time_ms": 0, "error_code": error}
    members = [
        {"member_id": member_id, "group_instance_id": instance_id, "error_code": member_error}
        for (member_id, instance_id), member_error in zip(leaving, member_errors, strict=False)
    ]
    return {"throttle_time_ms": 0, "error_code": error, "members": members}
