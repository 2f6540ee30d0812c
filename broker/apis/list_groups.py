"""ListGroups (16): every group of this coordinator (v4+: only those in the requested states; v5+: of the requested
types, "classic" or "consumer")."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    consumer_groups = broker.consumer_groups
    # A KIP-848 group's offsets sit in an Empty classic entry: it is listed once, as a consumer group.
    groups = [
        g
        for g in broker.groups.list_groups(list(body.states_filter), list(body.types_filter))
        if not consumer_groups.is_consumer_group(g["group_id"])
    ]
    groups += consumer_groups.list_groups(body.states_filter, body.types_filter)
    # Kafka answers COORDINATOR_LOAD_IN_PROGRESS while a partition led here is loading (with the groups it has).
    error = ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if broker.groups.partitions.loading else ErrorCode.NONE
    return {"throttle_time_ms": 0, "error_code": error, "groups": groups}
