"""Interop: kafka-python transactional producer and read_committed consumer.

Same scenarios as test_transactions_confluent.py: commit / abort visibility with exact offsets, the LSO holding
back read_committed (ListOffsets through ``end_offsets`` under each isolation level), fencing, broker-side
abort of a timed-out transaction, the transaction.max.timeout.ms bound. Consumers use assign() (no groups).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import (
    InvalidProducerEpochError,
    InvalidTransactionTimeoutError,
    KafkaError,
    ProducerFencedError,
)
from support.broker import BrokerProcess
from support.dataset import Consumed, Delivered, SampleRecord, make_records
from support.txn import TXN_BROKER_SETTINGS, TxnLog, check_consumed, check_delivered, round_robin, wait_for

PARTITIONS = 3
DEADLINE_S = 30.0
QUIET_S = 0.7
CREATE_TIME = 0  # ConsumerRecord.timestamp_type for CreateTime
MAX_BLOCK_MS = 20_000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess | None]:
    """This module's broker: detects timed-out transactions every 500 ms (Kafka default 10 s)."""
    from conftest import external_bootstrap

    if external_bootstrap():
        yield None
        return
    proc = BrokerProcess(tmp_path_factory.mktemp("broker") / "data", settings=TXN_BROKER_SETTINGS)
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


@pytest.fixture
def producers(bootstrap: str) -> Iterator[Callable[..., KafkaProducer]]:
    """``producers(txn_id=None, init=True, **conf)``: a transactional KafkaProducer, closed after the test."""
    made: list[KafkaProducer] = []

    def make(txn_id: str | None = None, *, init: bool = True, **conf: object) -> KafkaProducer:
        producer = KafkaProducer(
            bootstrap_servers=bootstrap,
            transactional_id=txn_id or f"kp-txn-{uuid.uuid4()}",
            linger_ms=5,
            max_block_ms=MAX_BLOCK_MS,
            **conf,
        )
        made.append(producer)
        if init:
            producer.init_transactions()
        return producer

    yield make
    for p in made:
        p.close(timeout=2)


def send(producer: KafkaProducer, topic: str, log: TxnLog, indexes: range) -> list[Delivered]:
    """Send ``log.records[i]`` to its round-robin partition for each index; flush; return where they landed."""
    futures = []
    for i in indexes:
        rec = log.records[i]
        futures.append(
            producer.send(
                topic,
                key=rec.key,
                value=rec.value,
                headers=list(rec.headers),
                partition=round_robin(i, log.partitions),
                timestamp_ms=rec.timestamp_ms,
            )
        )
    producer.flush(timeout=DEADLINE_S)
    out = []
    for i, fut in zip(indexes, futures, strict=True):
        md = fut.get(timeout=1)
        out.append(Delivered(i, md.partition, md.offset))
    return out


def plain_send(bootstrap: str, topic: str, log: TxnLog, indexes: range) -> list[Delivered]:
    """Send with a non-transactional (idempotent, kafka-python's default) producer."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5, max_block_ms=MAX_BLOCK_MS)
    try:
        return send(producer, topic, log, indexes)
    finally:
        producer.close(timeout=5)


def records(n: int, seed: int) -> list[SampleRecord]:
    """kafka-python refuses null header values and records with both key and value null."""
    return make_records(n, seed=seed, null_header_values=False, null_key_and_value=False)


def new_consumer(bootstrap: str, isolation: str) -> KafkaConsumer:
    return KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation,
    )


def consume(bootstrap: str, topic: str, expected: int, isolation: str) -> list[Consumed]:
    """Read every partition from the beginning until ``expected`` records arrived and ``QUIET_S`` passed
    without another one."""
    consumer = new_consumer(bootstrap, isolation)
    try:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[Consumed] = []
        end = time.monotonic() + DEADLINE_S
        quiet_until = None
        while quiet_until is None or time.monotonic() < quiet_until:
            assert time.monotonic() < end, f"{isolation}: consumed {len(out)}/{expected} in {DEADLINE_S}s"
            for tp_records in consumer.poll(timeout_ms=200, max_records=2000).values():
                for m in tp_records:
                    ts = m.timestamp if m.timestamp_type == CREATE_TIME else -1
                    out.append(Consumed(m.partition, m.offset, m.key, m.value, tuple(m.headers or ()), ts))
            if quiet_until is None and len(out) >= expected:
                quiet_until = time.monotonic() + QUIET_S
        return out
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, isolation: str) -> dict[int, int]:
    """``KafkaConsumer.end_offsets`` (ListOffsets latest) under ``isolation``: the LSO for read_committed."""
    consumer = new_consumer(bootstrap, isolation)
    try:
        got = consumer.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
        return {tp.partition: off for tp, off in got.items()}
    finally:
        consumer.close()


def wait_stable(bootstrap: str, topic: str, log: TxnLog) -> None:
    """Wait until read_committed's end offset is ``log``'s LSO; read_uncommitted's must be the log end."""
    want_lso = {p: log.lso(p) for p in range(PARTITIONS)}
    wait_for("LSO", lambda: end_offsets(bootstrap, topic, "read_committed"), lambda r: r == want_lso)
    assert end_offsets(bootstrap, topic, "read_uncommitted") == {p: log.end[p] for p in range(PARTITIONS)}


def is_fencing(exc: BaseException) -> bool:
    """kafka-python raises ProducerFencedError, or a KafkaError naming it once the producer is in error."""
    if isinstance(exc, ProducerFencedError | InvalidProducerEpochError):
        return True
    return isinstance(exc, KafkaError) and ("ProducerFenced" in str(exc) or "InvalidProducerEpoch" in str(exc))


def commit_error(producer: KafkaProducer) -> KafkaError:
    """The error commit_transaction() raises. After INVALID_PRODUCER_EPOCH on Produce kafka-python first tries
    to bump its epoch (KIP-360) and refuses to commit meanwhile; the broker must answer that bump with
    PRODUCER_FENCED, so keep trying until a different answer arrives."""
    end = time.monotonic() + 10
    while True:
        try:
            producer.commit_transaction()
        except KafkaError as exc:
            if "from state BUMPING_PRODUCER_EPOCH" in str(exc) and time.monotonic() < end:
                time.sleep(0.1)
                continue
            return exc
        raise AssertionError("commit_transaction() succeeded")


def test_commit_visible_with_marker_gaps(bootstrap: str, make_topic, producers) -> None:
    topic = make_topic("kp-txn-commit", PARTITIONS)
    log = TxnLog(PARTITIONS, records(600, 21))
    producer = producers()
    delivered = []
    for chunk in (range(0, 300), range(300, 600)):
        producer.begin_transaction()
        delivered += send(producer, topic, log, chunk)
        producer.commit_transaction()
        log.transaction(chunk, commit=True)
    check_delivered(log, delivered)
    check_consumed(log, consume(bootstrap, topic, 600, "read_committed"), read_committed=True)
    wait_stable(bootstrap, topic, log)
    assert log.end == {0: 202, 1: 202, 2: 202}


def test_abort_hidden_from_read_committed(bootstrap: str, make_topic, producers) -> None:
    topic = make_topic("kp-txn-abort", PARTITIONS)
    log = TxnLog(PARTITIONS, records(400, 22))
    producer = producers()
    producer.begin_transaction()
    delivered = send(producer, topic, log, range(0, 200))
    producer.abort_transaction()
    log.transaction(range(0, 200), commit=False)
    producer.begin_transaction()
    delivered += send(producer, topic, log, range(200, 400))
    producer.commit_transaction()
    log.transaction(range(200, 400), commit=True)

    check_delivered(log, delivered)
    check_consumed(log, consume(bootstrap, topic, 200, "read_committed"), read_committed=True)
    check_consumed(log, consume(bootstrap, topic, 400, "read_uncommitted"), read_committed=False)
    wait_stable(bootstrap, topic, log)


def test_open_transaction_holds_lso(bootstrap: str, make_topic, producers) -> None:
    topic = make_topic("kp-txn-lso", PARTITIONS)
    log = TxnLog(PARTITIONS, records(90, 23))
    delivered = plain_send(bootstrap, topic, log, range(0, 30))
    log.write(range(0, 30), transactional=False)
    producer = producers()
    producer.begin_transaction()
    delivered += send(producer, topic, log, range(30, 60))
    log.write(range(30, 60), transactional=True)
    delivered += plain_send(bootstrap, topic, log, range(60, 90))
    log.write(range(60, 90), transactional=False)
    check_delivered(log, delivered)

    assert {p: log.lso(p) for p in range(PARTITIONS)} == {0: 10, 1: 10, 2: 10}
    wait_stable(bootstrap, topic, log)
    check_consumed(log, consume(bootstrap, topic, 30, "read_committed"), read_committed=True)
    check_consumed(log, consume(bootstrap, topic, 90, "read_uncommitted"), read_committed=False)

    producer.commit_transaction()
    log.end_txn(commit=True)
    wait_stable(bootstrap, topic, log)
    check_consumed(log, consume(bootstrap, topic, 90, "read_committed"), read_committed=True)


def test_fencing_by_second_producer(bootstrap: str, make_topic, producers) -> None:
    topic = make_topic("kp-txn-fence", PARTITIONS)
    log = TxnLog(PARTITIONS, records(150, 24))
    txn_id = f"kp-fence-{uuid.uuid4()}"
    first = producers(txn_id)
    first.begin_transaction()
    delivered = send(first, topic, log, range(0, 50))
    log.write(range(0, 50), transactional=True)

    second = producers(txn_id)  # bumps the epoch and aborts first's open transaction
    log.end_txn(commit=False)

    futures = []
    try:
        for i in range(50, 60):
            rec = log.records[i]
            futures.append(first.send(topic, key=rec.key, value=rec.value, partition=round_robin(i, PARTITIONS)))
        first.flush(timeout=10)
    except KafkaError as exc:  # send() refuses once the producer knows it is fenced
        assert is_fencing(exc), repr(exc)
    for fut in futures:  # none of the fenced producer's records may be acknowledged
        with pytest.raises(KafkaError):
            fut.get(timeout=10)
    assert is_fencing(commit_error(first))

    second.begin_transaction()
    delivered += send(second, topic, log, range(100, 150))
    second.commit_transaction()
    log.transaction(range(100, 150), commit=True)
    check_delivered(log, delivered)
    check_consumed(log, consume(bootstrap, topic, 50, "read_committed"), read_committed=True)
    wait_stable(bootstrap, topic, log)


def test_timed_out_transaction_aborted_by_broker(bootstrap: str, make_topic, producers) -> None:
    topic = make_topic("kp-txn-timeout", PARTITIONS)
    log = TxnLog(PARTITIONS, records(60, 25))
    producer = producers(transaction_timeout_ms=2000)
    producer.begin_transaction()
    delivered = send(producer, topic, log, range(0, 30))
    log.write(range(0, 30), transactional=True)
    started = time.monotonic()

    log.end_txn(commit=False)  # what the broker must do by itself
    want = {p: log.end[p] for p in range(PARTITIONS)}
    wait_for(
        "LSO after timeout",
        lambda: end_offsets(bootstrap, topic, "read_committed"),
        lambda r: r == want,
        deadline_s=15.0,
    )
    elapsed = time.monotonic() - started
    assert elapsed < 8.0, f"timed-out transaction aborted only after {elapsed:.1f}s"

    delivered += plain_send(bootstrap, topic, log, range(30, 60))
    log.write(range(30, 60), transactional=False)
    check_delivered(log, delivered)
    check_consumed(log, consume(bootstrap, topic, 30, "read_committed"), read_committed=True)
    wait_stable(bootstrap, topic, log)

    assert is_fencing(commit_error(producer))


def test_transaction_timeout_above_broker_max(producers) -> None:
    # transaction.max.timeout.ms: Kafka default 900000 (15 min); one millisecond more is refused.
    producer = producers(init=False, transaction_timeout_ms=900_001)
    with pytest.raises(KafkaError) as exc:
        producer.init_transactions()
    # kafka-python wraps codes it does not expect from InitProducerId: "Unexpected error ...: [Error 50] ...".
    assert isinstance(exc.value, InvalidTransactionTimeoutError) or "[Error 50] InvalidTransactionTimeout" in str(
        exc.value
    ), repr(exc.value)

    at_limit = producers(transaction_timeout_ms=900_000)
    at_limit.begin_transaction()
    at_limit.abort_transaction()
