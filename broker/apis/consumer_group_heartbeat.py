"""ConsumerGroupHeartbeat (68, KIP-848): join, heartbeat in, reconcile with and leave a consumer group."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.group.consumer_coordinator import HeartbeatRequest
from oncelog.broker.request import Request

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    owned = body.topic_partitions
    result = await broker.consumer_groups.heartbeat(
        HeartbeatRequest(
            group_id=body.group_id,
            member_id=body.member_id,
            member_epoch=body.member_epoch,
            instance_id=body.instance_id,
            rack_id=body.rack_id,
            rebalance_timeout_ms=body.rebalance_timeout_ms,
            subscribed_topic_names=None if body.subscribed_topic_names is None else list(body.subscribed_topic_names),
            subscribed_topic_regex=body.subscribed_topic_regex,
            server_assignor=body.server_assignor,
            topic_partitions=None if owned is None else [(t.topic_id, list(t.partitions)) for t in owned],
            client_id=request.header.client_id or "",
            client_host=request.client_host,
        ),
        request.version,
    )
    return {"throttle_time_ms": 0, **result}
