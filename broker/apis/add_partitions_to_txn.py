"""AddPartitionsToTxn (24), v0-3: add partitions to the producer's transaction before writing to them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.broker.txn.errors import fencing_error
from oncelog.protocol import ApiKey, ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


def _results(errors: dict[tuple[str, int], ErrorCode]) -> list[dict]:
    by_topic: dict[str, list[dict]] = {}
    for (topic, partition), error in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": partition, "partition_error_code": error})
    return [{"name": topic, "results_by_partition": results} for topic, results in by_topic.items()]


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    wanted = [(t.name, p) for t in body.v3_and_below_topics for p in t.partitions]
    unknown = {
        (topic, partition)
        for topic, partition in wanted
        if (info := broker.metadata.get(topic)) is None or not 0 <= partition < info.partitions or info.is_internal
    }
    if unknown:
        # Kafka answers the bad partitions and marks the rest OPERATION_NOT_ATTEMPTED.
        errors = {
            tp: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else ErrorCode.OPERATION_NOT_ATTEMPTED
            for tp in wanted
        }
    else:
        error = await broker.transactions.add_partitions(
            body.v3_and_below_transactional_id,
            body.v3_and_below_producer_id,
            body.v3_and_below_producer_epoch,
            wanted,
            fencing_error(ApiKey.ADD_PARTITIONS_TO_TXN, request.version),
        )
        errors = dict.fromkeys(wanted, error)
    return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": _results(errors)}
