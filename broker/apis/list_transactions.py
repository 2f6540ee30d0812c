"""ListTransactions (66, KIP-664): the transactional ids this broker coordinates, filtered by state, producer id and
(v1) running time."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.clock import now_ms
from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode
from oncelog.protocol.internal.transaction_log import TxnState

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

KNOWN_STATE_NAMES = {code.kafka_name for code in TxnState}


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    states = set(body.state_filters)
    producer_ids = set(body.producer_id_filters)
    min_duration_ms = body.duration_filter
    now = now_ms()
    listed = []
    for metadata in broker.transactions.all():
        name = metadata.state.kafka_name
        if states and name not in states:
            continue
        if producer_ids and metadata.producer_id not in producer_ids:
            continue
        if min_duration_ms >= 0 and not (
            metadata.state == TxnState.ONGOING and now - metadata.start_timestamp_ms > min_duration_ms
        ):
            continue
        listed.append(
            {
                "transactional_id": metadata.transactional_id,
                "producer_id": metadata.producer_id,
                "transaction_state": name,
            }
        )
    return {
        "throttle_time_ms": 0,
        # Kafka answers COORDINATOR_LOAD_IN_PROGRESS while any partition led here is loading (with what it has).
        "error_code": ErrorCode.COORDINATOR_LOAD_IN_PROGRESS if broker.transactions.loading else ErrorCode.NONE,
        "unknown_state_filters": sorted(states - KNOWN_STATE_NAMES),
        "transaction_states": listed,
    }
