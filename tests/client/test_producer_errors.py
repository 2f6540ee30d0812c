"""Producer error handling against scripted broker answers (a fake connection; real codecs both ways)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from oncelog.client import (
    AbortableTransactionError,
    FatalProducerError,
    IllegalStateError,
    KafkaError,
    Producer,
    ProducerFencedError,
    TransactionAbortedError,
    TxnState,
)
from oncelog.client.errors import ErrorClass, classify
from oncelog.protocol import SUPPORTED_VERSIONS, ApiKey, ErrorCode
from oncelog.protocol.records import iter_batches

from .fake import NODE, FakeCluster, metadata_response

pytestmark = pytest.mark.anyio

TOPIC = "t"
PID = 4000


class Broker:
    """Scripted answers: per API key a list of error codes to answer in turn (then NONE)."""

    def __init__(self) -> None:
        self.errors: dict[ApiKey, list[int]] = {}
        self.epoch = 0
        self.produced: list[tuple[int, int, int, int]] = []  # (partition, base_sequence, epoch, records)
        self.init_requests: list[Mapping[str, Any]] = []
        self.end_txn: list[bool] = []
        self.offset = 0

    def next_error(self, key: ApiKey) -> int:
        queue = self.errors.get(key)
        return queue.pop(0) if queue else 0

    def __call__(self, key: ApiKey, version: int, body: Mapping[str, Any]) -> dict[str, Any]:
        if key == ApiKey.METADATA:
            return metadata_response({TOPIC: 2})
        if key == ApiKey.FIND_COORDINATOR:
            return {
                "coordinators": [
                    {"key": k, "node_id": NODE, "host": "fake", "port": 1, "error_code": 0}
                    for k in body["coordinator_keys"]
                ]
            }
        if key == ApiKey.INIT_PRODUCER_ID:
            self.init_requests.append(dict(body))
            code = self.next_error(key)
            if not code:
                self.epoch += 1
            return {"error_code": code, "producer_id": PID, "producer_epoch": self.epoch}
        if key == ApiKey.ADD_PARTITIONS_TO_TXN:
            code = self.next_error(key)
            return {
                "results_by_topic_v3_and_below": [
                    {
                        "name": t["name"],
                        "results_by_partition": [
                            {"partition_index": p, "partition_error_code": code} for p in t["partitions"]
                        ],
                    }
                    for t in body["v3_and_below_topics"]
                ]
            }
        if key == ApiKey.END_TXN:
            code = self.next_error(key)
            if not code:
                self.end_txn.append(body["committed"])
            return {"error_code": code}
        if key == ApiKey.PRODUCE:
            out = []
            for t in body["topic_data"]:
                parts = []
                for p in t["partition_data"]:
                    code = self.next_error(key)
                    for header, records in iter_batches(p["records"]):
                        if not code:
                            self.produced.append(
                                (p["index"], header.base_sequence, header.producer_epoch, len(records))
                            )
                    parts.append(
                        {"index": p["index"], "error_code": code, "base_offset": self.offset if not code else -1}
                    )
                    if not code:
                        self.offset += 1
                out.append({"name": t["name"], "partition_responses": parts})
            return {"responses": out}
        raise AssertionError(f"unexpected request {key!r}")


def producer(broker: Broker, versions: Mapping[int, tuple[int, int]] | None = None, **kw: Any) -> Producer:
    kw.setdefault("retry_backoff_ms", 1)
    kw.setdefault("linger_ms", 0)
    return Producer("fake:1", cluster=FakeCluster(broker, versions), **kw)


def test_classification_table() -> None:
    assert classify(ErrorCode.NONE) is ErrorClass.NONE
    assert classify(ErrorCode.NOT_LEADER_OR_FOLLOWER) is ErrorClass.RETRIABLE
    assert classify(ErrorCode.CONCURRENT_TRANSACTIONS) is ErrorClass.RETRIABLE
    assert classify(ErrorCode.COORDINATOR_LOAD_IN_PROGRESS) is ErrorClass.RETRIABLE
    for fatal in (
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
    ):
        assert classify(fatal) is ErrorClass.FATAL, fatal
    for abortable in (
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.TOPIC_AUTHORIZATION_FAILED,
        ErrorCode.MESSAGE_TOO_LARGE,
        ErrorCode.UNKNOWN_PRODUCER_ID,
        ErrorCode.CORRUPT_MESSAGE,
    ):
        assert classify(abortable) is ErrorClass.ABORTABLE, abortable


async def test_retriable_produce_error_keeps_sequence() -> None:
    broker = Broker()
    broker.errors[ApiKey.PRODUCE] = [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.REQUEST_TIMED_OUT]
    async with producer(broker) as p:
        first = await p.send_and_wait(TOPIC, b"a", partition=0)
        second = await p.send_and_wait(TOPIC, b"b", partition=0)
    assert (first.offset, second.offset) == (0, 1)
    # Two failed attempts were retried with the same sequence: the broker saw sequences 0 then 1 exactly once.
    assert broker.produced == [(0, 0, 1, 1), (0, 1, 1, 1)]


async def test_concurrent_transactions_and_coordinator_moves_are_retried() -> None:
    broker = Broker()
    broker.errors[ApiKey.INIT_PRODUCER_ID] = [ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS]
    broker.errors[ApiKey.ADD_PARTITIONS_TO_TXN] = [ErrorCode.CONCURRENT_TRANSACTIONS]
    broker.errors[ApiKey.END_TXN] = [ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.CONCURRENT_TRANSACTIONS]
    async with producer(broker, transactional_id="x") as p:
        await p.init_transactions()
        await p.begin_transaction()
        fut = await p.send(TOPIC, b"v", partition=1)
        await p.commit_transaction()
        assert (await fut).offset == 0
        assert p.transaction_state is TxnState.READY
    assert broker.end_txn == [True]
    assert len(broker.init_requests) == 3


async def test_abortable_error_then_abort_bumps_epoch_kip360() -> None:
    broker = Broker()
    async with producer(broker, transactional_id="x") as p:
        await p.init_transactions()
        await p.begin_transaction()
        broker.errors[ApiKey.PRODUCE] = [ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER]
        fut = await p.send(TOPIC, b"v", partition=0)
        with pytest.raises(AbortableTransactionError):
            await p.commit_transaction()
        with pytest.raises(Exception, match="OUT_OF_ORDER_SEQUENCE_NUMBER"):
            await fut
        assert p.transaction_state is TxnState.ABORTABLE_ERROR
        with pytest.raises(AbortableTransactionError):
            await p.send(TOPIC, b"w", partition=0)
        await p.abort_transaction()
        assert p.transaction_state is TxnState.READY
        assert p.producer_id_and_epoch == (PID, 2)
        # KIP-360: the second InitProducerId carries the current id and epoch.
        assert broker.init_requests[-1]["producer_id"] == PID
        assert broker.init_requests[-1]["producer_epoch"] == 1
        await p.begin_transaction()
        await p.send(TOPIC, b"after", partition=0)
        await p.commit_transaction()
    assert broker.end_txn == [False, True]
    assert broker.produced[-1] == (0, 0, 2, 1)  # sequences restart at 0 under the new epoch


async def test_epoch_bump_needs_init_producer_id_v3() -> None:
    broker = Broker()
    versions = dict(SUPPORTED_VERSIONS)
    versions[ApiKey.INIT_PRODUCER_ID] = (0, 2)
    async with producer(broker, versions, transactional_id="x") as p:
        await p.init_transactions()
        await p.begin_transaction()
        broker.errors[ApiKey.PRODUCE] = [ErrorCode.UNKNOWN_PRODUCER_ID]
        await p.send(TOPIC, b"v", partition=0)
        with pytest.raises(AbortableTransactionError):
            await p.commit_transaction()
        with pytest.raises(FatalProducerError, match="InitProducerId v3"):
            await p.abort_transaction()
        assert p.transaction_state is TxnState.FATAL_ERROR


async def test_fenced_on_end_txn_is_fatal() -> None:
    broker = Broker()
    async with producer(broker, transactional_id="x") as p:
        await p.init_transactions()
        await p.begin_transaction()
        await p.send_and_wait(TOPIC, b"v", partition=0)
        broker.errors[ApiKey.END_TXN] = [ErrorCode.PRODUCER_FENCED]
        with pytest.raises(ProducerFencedError):
            await p.commit_transaction()
        assert p.transaction_state is TxnState.FATAL_ERROR
        with pytest.raises(FatalProducerError):
            await p.begin_transaction()
        with pytest.raises(FatalProducerError):
            await p.abort_transaction()


async def test_invalid_epoch_on_produce_is_fatal() -> None:
    broker = Broker()
    async with producer(broker, transactional_id="x") as p:
        await p.init_transactions()
        await p.begin_transaction()
        broker.errors[ApiKey.PRODUCE] = [ErrorCode.INVALID_PRODUCER_EPOCH]
        fut = await p.send(TOPIC, b"v", partition=0)
        with pytest.raises(ProducerFencedError):
            await fut
        assert p.transaction_state is TxnState.FATAL_ERROR


async def test_add_partitions_authorization_error_is_abortable() -> None:
    broker = Broker()
    broker.errors[ApiKey.ADD_PARTITIONS_TO_TXN] = [ErrorCode.TOPIC_AUTHORIZATION_FAILED]
    async with producer(broker, transactional_id="x") as p:
        await p.init_transactions()
        await p.begin_transaction()
        fut = await p.send(TOPIC, b"v", partition=0)
        with pytest.raises(AbortableTransactionError, match="TOPIC_AUTHORIZATION_FAILED"):
            await p.commit_transaction()
        await p.abort_transaction()
        with pytest.raises(TransactionAbortedError):
            await fut
        assert broker.produced == []  # never added, so never sent
        assert broker.end_txn == []  # nothing was added: no EndTxn needed


async def test_abort_drops_unsent_records() -> None:
    broker = Broker()
    async with producer(broker, transactional_id="x", linger_ms=60000) as p:
        await p.init_transactions()
        await p.begin_transaction()
        first = await p.send(TOPIC, b"sent", partition=0)
        await p.flush()
        sent = await first
        lingering = await p.send(TOPIC, b"lingering", partition=0)
        await p.abort_transaction()
        with pytest.raises(TransactionAbortedError):
            await lingering
    assert sent.offset == 0
    assert broker.produced == [(0, 0, 1, 1)]
    assert broker.end_txn == [False]


async def test_send_outside_transaction_is_illegal() -> None:
    async with producer(Broker(), transactional_id="x") as p:
        with pytest.raises(IllegalStateError):
            await p.begin_transaction()  # before init_transactions
        await p.init_transactions()
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            await p.send(TOPIC, b"v")
        with pytest.raises(IllegalStateError):
            await p.commit_transaction()


async def test_records_refused_before_queueing_use_no_sequence_number() -> None:
    broker = Broker()
    async with producer(broker, max_request_size=1000) as p:
        with pytest.raises(KafkaError, match=r"MESSAGE_TOO_LARGE.*max\.request\.size \(1000\)"):
            await p.send(TOPIC, b"x" * 1000, partition=0)  # with the batch header, over 1000 bytes
        with pytest.raises(TypeError, match="bytes, str or None"):
            await p.send(TOPIC, 42, partition=0)  # type: ignore[arg-type]
        assert (await p.send_and_wait(TOPIC, b"x" * 800, partition=0)).offset == 0
    assert broker.produced == [(0, 0, 1, 1)]  # (partition, base sequence, epoch, records): sequence 0


async def test_pipelined_batches_retry_in_sequence_order() -> None:
    broker = Broker()
    # Three one-record batches in flight to partition 0: the first fails retriably, so the broker rejects the
    # next two for their sequence gap; all three are resent, in order, with their original sequences.
    broker.errors[ApiKey.PRODUCE] = [
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
    ]
    async with producer(broker, batch_size=1, linger_ms=1000) as p:
        futs = [await p.send(TOPIC, f"r{i}".encode(), partition=0) for i in range(3)]
        await p.flush()
        offsets = [(await f).offset for f in futs]
    assert offsets == [0, 1, 2]
    assert broker.produced == [(0, 0, 1, 1), (0, 1, 1, 1), (0, 2, 1, 1)]
    produce_requests = [body for key, body in p._cluster.conn.requests if key == ApiKey.PRODUCE]
    assert len(produce_requests) == 6  # 3 first attempts (one batch of the partition per request) + 3 retries


async def test_out_of_order_without_earlier_retry_is_not_retried() -> None:
    broker = Broker()
    broker.errors[ApiKey.PRODUCE] = [ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER]
    async with producer(broker) as p:
        with pytest.raises(Exception, match="OUT_OF_ORDER_SEQUENCE_NUMBER"):
            await p.send_and_wait(TOPIC, b"x", partition=0)
