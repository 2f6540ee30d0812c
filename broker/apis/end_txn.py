"""EndTxn (26): commit or abort; answered once the markers are durable in every partition."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.broker.txn.errors import fencing_error
from oncelog.protocol import ApiKey

if TYPE_CHECKING:
    from oncelog.broker.node import BrokerNode


async def handle(broker: BrokerNode, request: Request) -> dict:
    body = request.body
    error = await broker.transactions.end_transaction(
        body.transactional_id,
        body.producer_id,
        body.producer_epoch,
        body.committed,
        fencing_error(ApiKey.END_TXN, request.version),
    )
    return {"throttle_time_ms": 0, "error_code": error}
