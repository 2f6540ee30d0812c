"""InitProducerId (22): a producer id and epoch for idempotent and transactional producers.

Without a transactional id Kafka always hands out a new producer id with epoch 0, whatever a KIP-360 (v3+) request
carries. With one, the transaction coordinator bumps the epoch (fencing older producers) or allocates a new id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.broker.txn.errors import fencing_error
from oncelog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    if body.transactional_id is None:
        error, producer_id, epoch = ErrorCode.NONE, broker.producer_ids.next_id(), 0
    else:
        error, producer_id, epoch = await broker.transactions.init_producer_id(
            body.transactional_id,
            body.transaction_timeout_ms,
            body.producer_id,
            body.producer_epoch,
            fencing_error(ApiKey.INIT_PRODUCER_ID, request.version),
        )
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": producer_id, "producer_epoch": epoch}
