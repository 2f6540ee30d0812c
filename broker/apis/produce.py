"""Produce (0): append each partition's batches, then answer once the data is durable (acks=1/-1; at once for
partitions in page-cache mode, see ``broker.flusher``) or not at all (acks=0). On a partition led with followers,
acks=all is answered once the high watermark passes the batches (``ReplicaManager.wait_replicated``), or
REQUEST_TIMED_OUT after the request's timeout; a partition this node does not lead answers NOT_LEADER_OR_FOLLOWER.

Versions 0-2 are advertised (old librdkafka turns compression off unless the range includes v0) but every
partition is answered UNSUPPORTED_VERSION, as Kafka 4.0 does: they predate record batch v2.

Batches are parsed, CRC-checked and validated once, by the log (``storage.log_validator.validate_and_assign``).
This handler reads only unchecked header fields, as Kafka's KafkaApis does before the log: the first batch's
producer id and epoch (transaction verification) and, for versions below 7, each batch's codec (zstd).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio
from oncelog.broker.clock import now_ms
from oncelog.broker.faults import fault_point
from oncelog.broker.metadata import INTERNAL_TOPICS
from oncelog.broker.replica_manager import PartitionAppend
from oncelog.broker.request import Deferred, Request
from oncelog.protocol import ErrorCode
from oncelog.protocol.records.batch import InvalidBatchError, holds_codec, parse_header
from oncelog.protocol.records.compression import Compression
from oncelog.storage.log_validator import DecompressionBudget

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: The first Produce version that carries v2 record batches (Kafka 4.0 rejects 0-2).
MIN_RECORD_BATCH_V2_VERSION = 3
#: The first Produce version whose batches may be zstd-compressed (KIP-110).
MIN_ZSTD_VERSION = 7
#: The first Produce version whose NOT_LEADER_OR_FOLLOWER answers name the new leader (KIP-951).
CURRENT_LEADER_VERSION = 10
ACKS_ALL = -1
VALID_ACKS = (ACKS_ALL, 0, 1)
NO_TIMESTAMP = -1


def _partition_response(index: int, outcome: PartitionAppend) -> dict:
    result = outcome.result
    return {
        "index": index,
        "error_code": outcome.error,
        "base_offset": result.first_offset if result is not None else -1,
        "log_append_time_ms": result.log_append_time if result is not None else NO_TIMESTAMP,
        "log_start_offset": result.log_start_offset if result is not None else outcome.log_start_offset,
        "record_errors": [
            {"batch_index": index, "batch_index_error_message": message} for index, message in outcome.record_errors
        ],
        "error_message": outcome.message,
    }


def _isr_shortfall(broker: Broker, topic: str, partition: int) -> str | None:
    """Why an acks=all append must be refused with NOT_ENOUGH_REPLICAS (min.insync.replicas above the in-sync
    replica count, as Kafka's Partition.appendRecordsToLeader checks), or None."""
    partition_log = broker.logs.get(topic, partition)
    in_sync = broker.replicas.isr_size(topic, partition)
    if partition_log is None or partition_log.config.min_insync_replicas <= in_sync:
        return None
    return (
        f"The size of the current ISR {in_sync} is insufficient to satisfy the min.isr requirement of "
        f"{partition_log.config.min_insync_replicas} for partition {topic}-{partition}"
    )


#: Kafka's error message for a transactional write to a partition its transaction does not hold (KIP-890).
NOT_ADDED_MESSAGE = "Partition was not added to the transaction"


def _check_transactional(
    broker: Broker, transactional_id: str | None, topic: str, partition: int, records: bytes
) -> ErrorCode:
    """Transactional records need a transactional id whose open transaction already holds this partition."""
    try:
        header = parse_header(records)
    except InvalidBatchError:
        return ErrorCode.NONE  # the log rejects it with CORRUPT_MESSAGE
    if not header.is_transactional:
        return ErrorCode.NONE
    if transactional_id is None:
        return ErrorCode.INVALID_RECORD
    return broker.transactions.verify_produce(
        transactional_id, header.producer_id, header.producer_epoch, topic, partition
    )


def _append_all(broker: Broker, request: Request) -> list[tuple[str, list[tuple[int, PartitionAppend]]]]:
    body = request.body
    if request.version < MIN_RECORD_BATCH_V2_VERSION:
        reject: ErrorCode | None = ErrorCode.UNSUPPORTED_VERSION
    elif body.acks not in VALID_ACKS:
        reject = ErrorCode.INVALID_REQUIRED_ACKS
    else:
        reject = None
    timestamp = now_ms()
    budget = DecompressionBudget()  # one for the whole request: its batches together inflate at most this much
    outcomes = []
    for topic_data in body.topic_data:
        name = topic_data.name
        topic = broker.metadata.get(name)
        per_partition = []
        for partition_data in topic_data.partition_data:
            index = partition_data.index
            if reject is not None:
                outcome = PartitionAppend(reject)
            elif topic is None or not 0 <= index < topic.partitions:
                outcome = PartitionAppend(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif not broker.replicas.leads(name, index):
                outcome = PartitionAppend(ErrorCode.NOT_LEADER_OR_FOLLOWER)
            elif name in INTERNAL_TOPICS:
                outcome = PartitionAppend(
                    ErrorCode.INVALID_TOPIC_EXCEPTION, message=f"Cannot append to internal topic {name}"
                )
            elif not partition_data.records:
                outcome = PartitionAppend(ErrorCode.INVALID_RECORD, message="Produce request carries no records")
            elif request.version < MIN_ZSTD_VERSION and holds_codec(partition_data.records, Compression.ZSTD):
                outcome = PartitionAppend(
                    ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                    message=f"Produce requests with version {request.version} are not allowed to use ZStandard",
                )
            elif body.acks == ACKS_ALL and (short := _isr_shortfall(broker, name, index)):
                outcome = PartitionAppend(ErrorCode.NOT_ENOUGH_REPLICAS, message=short)
            elif error := _check_transactional(broker, body.transactional_id, name, index, partition_data.records):
                outcome = PartitionAppend(
                    error, message=NOT_ADDED_MESSAGE if error == ErrorCode.INVALID_TXN_STATE else None
                )
            else:
                outcome = broker.replicas.append(name, index, partition_data.records, timestamp, budget=budget)
            per_partition.append((index, outcome))
        outcomes.append((name, per_partition))
    return outcomes


def _response(broker: Broker, request: Request, outcomes: list[tuple[str, list[tuple[int, PartitionAppend]]]]) -> dict:
    response = {
        "responses": [
            {"name": name, "partition_responses": [_partition_response(index, o) for index, o in per_partition]}
            for name, per_partition in outcomes
        ],
        "throttle_time_ms": 0,
    }
    if request.version >= CURRENT_LEADER_VERSION:
        _name_new_leaders(broker, request.listener, response)
    return response


def _name_new_leaders(broker: Broker, listener: str | None, response: dict) -> None:
    """KIP-951: a partition answered NOT_LEADER_OR_FOLLOWER carries its current leader and epoch, and the response
    the leaders' endpoints, so the client sends its retry there without asking for Metadata first."""
    leaders: set[int] = set()
    for topic in response["responses"]:
        for entry in topic["partition_responses"]:
            if entry["error_code"] != ErrorCode.NOT_LEADER_OR_FOLLOWER:
                continue
            state = broker.cluster.partition(topic["name"], entry["index"])
            if state is not None and state.leader >= 0 and state.leader != broker.node_id:
                entry["current_leader"] = {"leader_id": state.leader, "leader_epoch": state.leader_epoch}
                leaders.add(state.leader)
    if leaders:
        response["node_endpoints"] = [
            {"node_id": b.node_id, "host": b.host, "port": b.port, "rack": b.rack}
            for b in broker.cluster.brokers(listener)
            if b.node_id in leaders
        ]


async def handle(broker: Broker, request: Request) -> dict | Deferred | None:
    deadline = trio.current_time() + max(request.body.timeout_ms, 0) / 1000
    outcomes = _append_all(broker, request)
    if request.body.acks == 0:
        return None
    pending = [
        (name, index, outcome)
        for name, per_partition in outcomes
        for index, outcome in per_partition
        if outcome.error == ErrorCode.NONE and outcome.result is not None
    ]
    if pending:
        fault_point("produce.after_append")
    # Ask for every partition's fsync now (None: a page-cache partition, or already durable): the answer waits in the
    # connection's queue behind earlier ones, and the fsyncs of pipelined requests to different partitions should
    # overlap rather than start as it reaches the front.
    waits = [
        (outcome, waiter)
        for name, index, outcome in pending
        if outcome.result is not None
        and (waiter := broker.replicas.request_durable(name, index, outcome.result.last_offset + 1)) is not None
    ]
    # acks=all on a partition with followers: the high watermark must pass the batches.
    replicated = [
        (name, index, outcome)
        for name, index, outcome in pending
        if request.body.acks == ACKS_ALL and broker.replicas.replicated(name, index)
    ]
    if not waits and not replicated:
        return _response(broker, request, outcomes)

    async def complete() -> dict:
        for outcome, waiter in waits:
            error = await broker.replicas.wait_requested(waiter)
            if error != ErrorCode.NONE:
                outcome.error, outcome.result = error, None
        fault_point("produce.after_fsync")
        for name, index, outcome in replicated:
            if outcome.error == ErrorCode.NONE and outcome.result is not None:
                end = outcome.result.last_offset + 1
                error = await broker.replicas.wait_replicated(name, index, end, deadline)
                if error != ErrorCode.NONE:
                    outcome.error, outcome.result = error, None
        return _response(broker, request, outcomes)

    def ready() -> bool:
        return all(waiter.done.is_set() for _outcome, waiter in waits) and all(
            outcome.result is None
            or broker.replicas.replication_outcome(name, index, outcome.result.last_offset + 1) is not None
            for name, index, outcome in replicated
        )

    return Deferred(complete, ready)
