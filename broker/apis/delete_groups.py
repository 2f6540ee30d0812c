"""DeleteGroups (42): delete empty groups with their offsets (NON_EMPTY_GROUP while members remain)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    results = [
        {"group_id": group_id, "error_code": await _delete(broker, group_id)} for group_id in request.body.groups_names
    ]
    return {"throttle_time_ms": 0, "results": results}


async def _delete(broker: Broker, group_id: str) -> ErrorCode:
    """A KIP-848 group goes only when empty; its offsets go with its classic entry (GROUP_ID_NOT_FOUND there means
    it had none)."""
    consumer = await broker.consumer_groups.delete(group_id)
    if consumer is None:
        return await broker.groups.delete_group(group_id)
    if consumer != ErrorCode.NONE:
        return consumer
    error = await broker.groups.delete_group(group_id)
    return ErrorCode.NONE if error == ErrorCode.GROUP_ID_NOT_FOUND else error
