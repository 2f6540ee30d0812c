"""AddOffsetsToTxn (25): add the group's ``__consumer_offsets`` partition to the transaction."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.broker.txn.errors import fencing_error
from oncelog.protocol import ApiKey

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    await broker.ensure_offsets_topic()
    error = await broker.transactions.add_partitions(
        body.transactional_id,
        body.producer_id,
        body.producer_epoch,
        [broker.transactions.offsets_partition_for(body.group_id)],
        fencing_error(ApiKey.ADD_OFFSETS_TO_TXN, request.version),
    )
    return {"throttle_time_ms": 0, "error_code": error}
