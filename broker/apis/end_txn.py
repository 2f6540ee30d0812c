"""EndTxn (26): commit or abort; answered once the markers are durable in every partition.

From v5 (KIP-890 part 2) the transaction ends with a bumped producer epoch, which the response carries; the
client produces its next transaction with it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.broker.txn.errors import fencing_error
from oncelog.protocol import ApiKey

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: The first EndTxn version whose transaction ends with an epoch bump (Kafka's TransactionVersion 2).
EPOCH_BUMP_SINCE = 5


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    error, producer_id, producer_epoch = await broker.transactions.end_transaction(
        body.transactional_id,
        body.producer_id,
        body.producer_epoch,
        body.committed,
        fencing_error(ApiKey.END_TXN, request.version),
        bump_epoch=request.version >= EPOCH_BUMP_SINCE,
    )
    return {"throttle_time_ms": 0, "error_code": error, "producer_id": producer_id, "producer_epoch": producer_epoch}
