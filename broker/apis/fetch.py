"""Fetch (1): whole batches up to the high watermark (read_uncommitted) or the last stable offset (read_committed),
with long polling on ``max_wait_ms`` / ``min_bytes`` and Kafka's ``max_bytes`` / ``partition_max_bytes`` limits.

No incremental fetch sessions are created: every response is a full one (session id 0) holding every requested
partition, which all clients accept (kafka-python included, which asks for a session and falls back).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio
from oncelog.broker.replica_manager import READ_COMMITTED, PartitionRead
from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode
from oncelog.protocol.records.batch import holds_codec
from oncelog.protocol.records.compression import Compression

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

NO_PREFERRED_REPLICA = -1
#: Kafka's FetchRequest.INVALID_SESSION_ID / FINAL_EPOCH / INITIAL_EPOCH.
NO_SESSION_ID = 0
SESSIONLESS_EPOCH = -1
INITIAL_EPOCH = 0
#: The first Fetch version whose client can read zstd-compressed batches (KIP-110).
MIN_ZSTD_VERSION = 10
#: Upper bound on a long poll, whatever the client asks (Kafka caps it by request.timeout on the client side).
MAX_WAIT_CAP_MS = 60_000


def _read_all(broker: Broker, request: Request) -> tuple[list[tuple[str, list[tuple[int, PartitionRead]]]], int]:
    body = request.body
    remaining = body.max_bytes if request.version >= 3 else 2**31 - 1
    isolation = body.isolation_level
    total = 0
    results = []
    for topic_request in body.topics:
        name = topic_request.topic
        topic = broker.metadata.get(name)
        per_partition = []
        for partition_request in topic_request.partitions:
            index = partition_request.partition
            if topic is None or not 0 <= index < topic.partitions:
                read = PartitionRead(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            else:
                # The first batch of the response is returned whole even above the limits (Kafka's
                # minOneMessage), so a consumer always makes progress.
                limit = min(partition_request.partition_max_bytes, max(remaining, 0))
                read = broker.replicas.read(
                    name, index, partition_request.fetch_offset, limit, isolation, min_one_batch=total == 0
                )
                if request.version < MIN_ZSTD_VERSION and holds_codec(read.records, Compression.ZSTD):
                    # Such a client cannot decode zstd (KIP-110): Kafka answers this instead of the records.
                    read = PartitionRead(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
                remaining -= len(read.records)
                total += len(read.records)
            per_partition.append((index, read))
        results.append((name, per_partition))
    return results, total


def _partition_response(index: int, read: PartitionRead, isolation: int) -> dict:
    return {
        "partition_index": index,
        "error_code": read.error,
        "high_watermark": read.high_watermark,
        "last_stable_offset": read.last_stable_offset,
        "log_start_offset": read.log_start_offset,
        "aborted_transactions": (
            [{"producer_id": pid, "first_offset": first} for pid, first in read.aborted_transactions]
            if isolation == READ_COMMITTED
            else None
        ),
        "preferred_read_replica": NO_PREFERRED_REPLICA,
        "records": read.records,
    }


def _response(results: list[tuple[str, list[tuple[int, PartitionRead]]]], isolation: int) -> dict:
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "session_id": NO_SESSION_ID,
        "responses": [
            {"topic": name, "partitions": [_partition_response(i, r, isolation) for i, r in per_partition]}
            for name, per_partition in results
        ],
    }


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    if request.version >= 7 and body.session_id != NO_SESSION_ID:
        return {
            "throttle_time_ms": 0,
            "error_code": ErrorCode.FETCH_SESSION_ID_NOT_FOUND,
            "session_id": 0,
            "responses": [],
        }
    watched = [(t.topic, p.partition) for t in body.topics for p in t.partitions]
    deadline = trio.current_time() + min(max(body.max_wait_ms, 0), MAX_WAIT_CAP_MS) / 1000
    while True:
        results, total = _read_all(broker, request)
        has_error = any(read.error != ErrorCode.NONE for _, reads in results for _, read in reads)
        if total >= body.min_bytes or has_error or trio.current_time() >= deadline or not watched:
            return _response(results, body.isolation_level)
        data_arrived = trio.Event()
        broker.replicas.watch(watched, data_arrived)
        try:
            with trio.move_on_at(deadline):
                await data_arrived.wait()
        finally:
            broker.replicas.unwatch(watched, data_arrived)
