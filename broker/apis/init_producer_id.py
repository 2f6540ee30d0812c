"""InitProducerId (22) for idempotent producers: a fresh producer id with epoch 0.

Without a transactional id Kafka always hands out a new producer id, whatever id/epoch a KIP-360 (v3+) request
carries. Transactional ids need the transaction coordinator, which this broker does not have yet.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.node import BrokerNode


async def handle(broker: BrokerNode, request: Request) -> dict:
    if request.body.transactional_id is not None:
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.COORDINATOR_NOT_AVAILABLE,
            "producer_id": -1,
            "producer_epoch": -1,
        }
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "producer_id": broker.producer_ids.next_id(),
        "producer_epoch": 0,
    }
