"""JoinGroup (11): join or rejoin a group; answered when the join phase ends (see broker.group.coordinator)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.group.coordinator import JoinRequest, join_error
from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: The first version that must take its member id in a MEMBER_ID_REQUIRED round trip (KIP-394).
MEMBER_ID_REQUIRED_SINCE = 4
#: The first version whose protocol_name may be null.
NULLABLE_PROTOCOL_NAME_SINCE = 7


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    rebalance_timeout = body.rebalance_timeout_ms if request.version >= 1 else body.session_timeout_ms
    # A consumer (KIP-848) group with members refuses classic members; an empty one becomes classic.
    if (error := await broker.consumer_groups.claim_for_classic(body.group_id)) != ErrorCode.NONE:
        result = join_error(error, body.member_id)
    else:
        result = await broker.groups.join_group(
            JoinRequest(
                group_id=body.group_id,
                member_id=body.member_id,
                group_instance_id=body.group_instance_id,
                require_known_member_id=request.version >= MEMBER_ID_REQUIRED_SINCE,
                client_id=request.header.client_id or "",
                client_host=request.client_host,
                rebalance_timeout_ms=rebalance_timeout,
                session_timeout_ms=body.session_timeout_ms,
                protocol_type=body.protocol_type,
                protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
            )
        )
    if request.version < NULLABLE_PROTOCOL_NAME_SINCE and result["protocol_name"] is None:
        result = {**result, "protocol_name": ""}
    return {"throttle_time_ms": 0, "skip_assignment": False, **result}
