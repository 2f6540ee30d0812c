"""ConsumerGroupDescribe (69, KIP-848): epochs, assignor, members with their current and target assignments."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.authorized_operations import OMITTED, AclOperation, bitfield
from oncelog.broker.request import Request

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: Kafka's AclEntry.supportedOperations of a GROUP: all of them, there being no authorizer.
GROUP_OPERATIONS = bitfield(
    AclOperation.READ,
    AclOperation.DESCRIBE,
    AclOperation.DELETE,
    AclOperation.DESCRIBE_CONFIGS,
    AclOperation.ALTER_CONFIGS,
)


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    operations = GROUP_OPERATIONS if body.include_authorized_operations else OMITTED
    groups = [
        {**broker.consumer_groups.describe(group_id), "authorized_operations": operations}
        for group_id in body.group_ids
    ]
    return {"throttle_time_ms": 0, "groups": groups}
