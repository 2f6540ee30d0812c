"""AddOffsetsToTxn (25): add the group's ``__consumer_offsets`` partition to the transaction.

As in Kafka (KafkaApis.handleAddOffsetsToTxnRequest) the partition is only computed from the group id and
``offsets.topic.num.partitions``; ``__consumer_offsets`` is not created here, so the answer does not depend on
whether it can be created (on a cluster with fewer live brokers than ``offsets.topic.replication.factor`` it
cannot). Its TxnOffsetCommit then waits for the group's coordinator (COORDINATOR_NOT_AVAILABLE), and EndTxn skips
the marker of a partition whose topic does not exist, as Kafka's marker channel does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.broker.txn.errors import fencing_error
from oncelog.protocol import ApiKey

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    error = await broker.transactions.add_partitions(
        body.transactional_id,
        body.producer_id,
        body.producer_epoch,
        [broker.transactions.offsets_partition_for(body.group_id)],
        fencing_error(ApiKey.ADD_OFFSETS_TO_TXN, request.version),
    )
    return {"throttle_time_ms": 0, "error_code": error}
