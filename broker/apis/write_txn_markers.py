"""WriteTxnMarkers (27): the partition leader appends the coordinator's markers (the same path the local
coordinator uses, see broker.txn.markers)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio
from oncelog.broker.request import Request
from oncelog.broker.txn.markers import TxnMarker, append_markers, wait_markers_durable
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    """Every marker of the request is appended first, then all are waited for together (their fsyncs and
    replication overlap: a coordinator's marker channel batches many transactions' markers into one request)."""
    entries = []
    for entry in request.body.markers:
        partitions = [(t.name, p) for t in entry.topics for p in t.partition_indexes]
        known = [tp for tp in partitions if broker.replicas.get_log(*tp) is not None]
        marker = TxnMarker(
            entry.producer_id,
            entry.producer_epoch,
            entry.coordinator_epoch,
            entry.transaction_result,
            frozenset(known),
        )
        entries.append(
            (entry.producer_id, partitions, append_markers(broker.replicas, marker, known, listener=broker.groups))
        )
    outcomes: list[dict[tuple[str, int], ErrorCode]] = [{} for _ in entries]

    async def wait(index: int, appended: dict[tuple[str, int], tuple[ErrorCode, int]]) -> None:
        outcomes[index] = await wait_markers_durable(broker.replicas, appended)

    async with trio.open_nursery() as nursery:
        for index, (_producer_id, _partitions, appended) in enumerate(entries):
            nursery.start_soon(wait, index, appended)
    results = []
    for (producer_id, partitions, _appended), errors in zip(entries, outcomes, strict=True):
        by_topic: dict[str, list[dict]] = {}
        for topic, partition in partitions:
            error = errors.get((topic, partition), ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            by_topic.setdefault(topic, []).append({"partition_index": partition, "error_code": error})
        results.append(
            {
                "producer_id": producer_id,
                "topics": [{"name": topic, "partitions": parts} for topic, parts in by_topic.items()],
            }
        )
    return {"markers": results}
