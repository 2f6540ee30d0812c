"""DescribeProducers (61, KIP-664): the active producers of each partition, from its producer state."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


def _partition(broker: Broker, topic: str, index: int) -> dict:
    partition_log = broker.replicas.get_log(topic, index)
    if partition_log is None:
        return {
            "partition_index": index,
            "error_code": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            "error_message": None,
            "active_producers": [],
        }
    producers = [
        {
            "producer_id": p.producer_id,
            "producer_epoch": p.producer_epoch,
            "last_sequence": p.last_sequence,
            "last_timestamp": p.last_timestamp,
            "coordinator_epoch": p.coordinator_epoch,
            "current_txn_start_offset": p.current_txn_start_offset,
        }
        for p in partition_log.producer_state.active_producers()
    ]
    return {
        "partition_index": index,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "active_producers": producers,
    }


async def handle(broker: Broker, request: Request) -> dict:
    return {
        "throttle_time_ms": 0,
        "topics": [
            {"name": t.name, "partitions": [_partition(broker, t.name, i) for i in t.partition_indexes]}
            for t in request.body.topics
        ],
    }
