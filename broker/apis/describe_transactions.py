"""DescribeTransactions (65, KIP-664): the coordinator's view of each transactional id."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


def _describe(broker: Broker, transactional_id: str) -> dict:
    status = broker.transactions.status(transactional_id)
    metadata = broker.transactions.get(transactional_id)
    if status != ErrorCode.NONE or metadata is None:
        return {
            # NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS for ids this broker does not coordinate now.
            "error_code": status if status != ErrorCode.NONE else ErrorCode.TRANSACTIONAL_ID_NOT_FOUND,
            "transactional_id": transactional_id,
            "transaction_state": "",
            "transaction_timeout_ms": 0,
            "transaction_start_time_ms": -1,
            "producer_id": -1,
            "producer_epoch": -1,
            "topics": [],
        }
    topics: dict[str, list[int]] = {}
    for topic, partition in sorted(metadata.partitions):
        topics.setdefault(topic, []).append(partition)
    return {
        "error_code": ErrorCode.NONE,
        "transactional_id": transactional_id,
        "transaction_state": metadata.state.kafka_name,
        "transaction_timeout_ms": metadata.timeout_ms,
        "transaction_start_time_ms": metadata.start_timestamp_ms,
        "producer_id": metadata.producer_id,
        "producer_epoch": metadata.producer_epoch,
        "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
    }


async def handle(broker: Broker, request: Request) -> dict:
    return {
        "throttle_time_ms": 0,
        "transaction_states": [_describe(broker, t) for t in request.body.transactional_ids],
    }
