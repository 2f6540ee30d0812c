"""DeleteGroups (42): delete empty groups with their offsets (NON_EMPTY_GROUP while members remain)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    results = [
        {"group_id": group_id, "error_code": await broker.groups.delete_group(group_id)}
        for group_id in request.body.groups_names
    ]
    return {"throttle_time_ms": 0, "results": results}
