"""Interop: confluent-kafka (librdkafka) transactional producer and read_committed consumer.

Checks, against Kafka's semantics: commit / abort visibility with exact offsets (one control record per
partition per transaction), the last stable offset holding back read_committed while a transaction is open,
fencing by a second producer with the same transactional.id, the broker aborting a timed-out transaction, and
the transaction.max.timeout.ms bound. No consumer groups: consumers use assign().
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    OFFSET_BEGINNING,
    TIMESTAMP_CREATE_TIME,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec
from support.broker import BrokerProcess
from support.dataset import Consumed, Delivered, make_records
from support.txn import (
    ERR_INVALID_TRANSACTION_TIMEOUT,
    TXN_BROKER_SETTINGS,
    TxnLog,
    check_consumed,
    check_delivered,
    round_robin,
    wait_for,
)

PARTITIONS = 3
DEADLINE_S = 30.0
QUIET_S = 0.7  # how long a consumer must stay silent to count as "sees nothing more"
FENCED = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}


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


def txn_producer(bootstrap: str, txn_id: str | None = None, **conf: object) -> Producer:
    """A transactional producer that has completed init_transactions()."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id or f"ck-txn-{uuid.uuid4()}",
            "linger.ms": 5,
            **conf,
        }
    )
    producer.init_transactions(DEADLINE_S)
    return producer


def send(producer: Producer, topic: str, log: TxnLog, indexes: range) -> list[Delivered]:
    """Produce ``log.records[i]`` for each index to its round-robin partition; flush; return the reports."""
    delivered: list[Delivered] = []
    errors: list[KafkaError] = []

    def report(index: int):
        def cb(err: KafkaError | None, msg: object) -> None:
            if err is not None:
                errors.append(err)
            else:
                delivered.append(Delivered(index, msg.partition(), msg.offset()))  # type: ignore[attr-defined]

        return cb

    for i in indexes:
        rec = log.records[i]
        producer.produce(
            topic,
            key=rec.key,
            value=rec.value,
            headers=list(rec.headers),
            timestamp=rec.timestamp_ms,
            partition=round_robin(i, log.partitions),
            on_delivery=report(i),
        )
    assert producer.flush(DEADLINE_S) == 0, "records undelivered"
    assert not errors, errors[:3]
    return delivered


def plain_send(bootstrap: str, topic: str, log: TxnLog, indexes: range) -> list[Delivered]:
    """Produce with a non-transactional idempotent producer."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    return send(producer, topic, log, indexes)


def consume(bootstrap: str, topic: str, expected: int, isolation: str) -> list[Consumed]:
    """Read every partition from the beginning until ``expected`` records arrived and then ``QUIET_S`` passed
    without another one."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "oncelog-interop-unused",  # required by the client; no group APIs are used
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out: list[Consumed] = []
        end = time.monotonic() + DEADLINE_S
        quiet_until = None
        while quiet_until is None or time.monotonic() < quiet_until:
            assert time.monotonic() < end, f"{isolation}: consumed {len(out)}/{expected} in {DEADLINE_S}s"
            for m in consumer.consume(num_messages=1000, timeout=0.2):
                if m.error() is not None:
                    raise AssertionError(f"consumer error: {m.error()}")
                ts_type, ts = m.timestamp()
                headers = tuple(m.headers() or ())
                ts = ts if ts_type == TIMESTAMP_CREATE_TIME else -1
                out.append(Consumed(m.partition(), m.offset(), m.key(), m.value(), headers, ts))
            if quiet_until is None and len(out) >= expected:
                quiet_until = time.monotonic() + QUIET_S
        return out
    finally:
        consumer.close()


def list_latest(bootstrap: str, topic: str, isolation: IsolationLevel) -> dict[int, int]:
    """ListOffsets(latest) per partition with the given isolation level (LSO for read_committed)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.list_offsets(
        {TopicPartition(topic, p): OffsetSpec.latest() for p in range(PARTITIONS)},
        isolation_level=isolation,
        request_timeout=10,
    )
    return {tp.partition: f.result(timeout=15).offset for tp, f in futures.items()}


def committed_watermarks(bootstrap: str, topic: str) -> dict[int, int]:
    """High watermark as a read_committed consumer's get_watermark_offsets reports it (the LSO)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "oncelog-interop-unused", "isolation.level": "read_committed"}
    )
    try:
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10, cached=False)[1]
            for p in range(PARTITIONS)
        }
    finally:
        consumer.close()


def wait_stable(bootstrap: str, topic: str, log: TxnLog) -> None:
    """Wait until the read_committed end offset equals ``log``'s LSO and read_uncommitted its log end offset
    (markers are written after EndTxn returns)."""
    want_lso = {p: log.lso(p) for p in range(PARTITIONS)}
    want_end = {p: log.end[p] for p in range(PARTITIONS)}
    wait_for("LSO", lambda: list_latest(bootstrap, topic, IsolationLevel.READ_COMMITTED), lambda r: r == want_lso)
    assert list_latest(bootstrap, topic, IsolationLevel.READ_UNCOMMITTED) == want_end
    assert committed_watermarks(bootstrap, topic) == want_lso


def fence_error(producer: Producer) -> KafkaError:
    """Try to commit; the producer must be fenced. If librdkafka first reports an abortable error (it may
    treat INVALID_PRODUCER_EPOCH on Produce that way), the abort that follows must reveal the fence."""
    with pytest.raises(KafkaException) as exc:
        producer.commit_transaction(DEADLINE_S)
    err: KafkaError = exc.value.args[0]
    if not err.fatal() and err.txn_requires_abort():
        with pytest.raises(KafkaException) as exc:
            producer.abort_transaction(DEADLINE_S)
        err = exc.value.args[0]
    return err


def test_commit_visible_with_marker_gaps(bootstrap: str, make_topic) -> None:
    topic = make_topic("ck-txn-commit", PARTITIONS)
    log = TxnLog(PARTITIONS, make_records(600, seed=11))
    producer = txn_producer(bootstrap)
    delivered = []
    for chunk in (range(0, 300), range(300, 600)):
        producer.begin_transaction()
        delivered += send(producer, topic, log, chunk)
        producer.commit_transaction(DEADLINE_S)
        log.transaction(chunk, commit=True)
    check_delivered(log, delivered)
    assert len(delivered) == 600
    check_consumed(log, consume(bootstrap, topic, 600, "read_committed"), read_committed=True)
    wait_stable(bootstrap, topic, log)
    assert log.end == {0: 202, 1: 202, 2: 202}  # 2 x 100 records + 2 markers per partition


def test_abort_hidden_from_read_committed(bootstrap: str, make_topic) -> None:
    topic = make_topic("ck-txn-abort", PARTITIONS)
    log = TxnLog(PARTITIONS, make_records(400, seed=12))
    producer = txn_producer(bootstrap)
    producer.begin_transaction()
    delivered = send(producer, topic, log, range(0, 200))
    producer.abort_transaction(DEADLINE_S)
    log.transaction(range(0, 200), commit=False)
    producer.begin_transaction()
    delivered += send(producer, topic, log, range(200, 400))
    producer.commit_transaction(DEADLINE_S)
    log.transaction(range(200, 400), commit=True)

    check_delivered(log, delivered)
    check_consumed(log, consume(bootstrap, topic, 200, "read_committed"), read_committed=True)
    check_consumed(log, consume(bootstrap, topic, 400, "read_uncommitted"), read_committed=False)
    wait_stable(bootstrap, topic, log)


def test_open_transaction_holds_lso(bootstrap: str, make_topic) -> None:
    topic = make_topic("ck-txn-lso", PARTITIONS)
    log = TxnLog(PARTITIONS, make_records(90, seed=13))
    delivered = plain_send(bootstrap, topic, log, range(0, 30))
    log.write(range(0, 30), transactional=False)
    producer = txn_producer(bootstrap)
    producer.begin_transaction()
    delivered += send(producer, topic, log, range(30, 60))
    log.write(range(30, 60), transactional=True)
    delivered += plain_send(bootstrap, topic, log, range(60, 90))
    log.write(range(60, 90), transactional=False)
    check_delivered(log, delivered)

    # While open: read_committed stops at the transaction's first offset; read_uncommitted sees everything.
    assert {p: log.lso(p) for p in range(PARTITIONS)} == {0: 10, 1: 10, 2: 10}
    wait_stable(bootstrap, topic, log)
    check_consumed(log, consume(bootstrap, topic, 30, "read_committed"), read_committed=True)
    check_consumed(log, consume(bootstrap, topic, 90, "read_uncommitted"), read_committed=False)

    producer.commit_transaction(DEADLINE_S)
    log.end_txn(commit=True)
    wait_stable(bootstrap, topic, log)
    check_consumed(log, consume(bootstrap, topic, 90, "read_committed"), read_committed=True)


def test_fencing_by_second_producer(bootstrap: str, make_topic) -> None:
    topic = make_topic("ck-txn-fence", PARTITIONS)
    log = TxnLog(PARTITIONS, make_records(150, seed=14))
    txn_id = f"ck-fence-{uuid.uuid4()}"
    first = txn_producer(bootstrap, txn_id)
    first.begin_transaction()
    delivered = send(first, topic, log, range(0, 50))
    log.write(range(0, 50), transactional=True)

    second = txn_producer(bootstrap, txn_id)  # bumps the epoch and aborts first's open transaction
    log.end_txn(commit=False)

    acked: list[int] = []
    for i in range(50, 60):
        rec = log.records[i]
        first.produce(
            topic,
            key=rec.key,
            value=rec.value,
            partition=round_robin(i, PARTITIONS),
            on_delivery=lambda err, m: err is None and acked.append(m.offset()),
        )
    # The Produce fails with INVALID_PRODUCER_EPOCH; confluent-kafka raises the resulting fatal error from poll().
    end = time.monotonic() + 10
    with pytest.raises(KafkaException) as exc:
        while time.monotonic() < end:
            first.poll(0.1)
    err = exc.value.args[0]
    assert err.fatal() and err.code() in FENCED, err
    assert not acked, f"fenced producer's records acknowledged at {acked}"
    err = fence_error(first)
    assert err.fatal(), err
    assert err.code() in FENCED, err

    second.begin_transaction()
    delivered += send(second, topic, log, range(100, 150))
    second.commit_transaction(DEADLINE_S)
    log.transaction(range(100, 150), commit=True)
    check_delivered(log, delivered)
    check_consumed(log, consume(bootstrap, topic, 50, "read_committed"), read_committed=True)
    wait_stable(bootstrap, topic, log)


def test_timed_out_transaction_aborted_by_broker(bootstrap: str, make_topic) -> None:
    topic = make_topic("ck-txn-timeout", PARTITIONS)
    log = TxnLog(PARTITIONS, make_records(60, seed=15))
    producer = txn_producer(bootstrap, **{"transaction.timeout.ms": 2000})
    producer.begin_transaction()
    delivered = send(producer, topic, log, range(0, 30))
    log.write(range(0, 30), transactional=True)
    started = time.monotonic()

    # The producer now hangs; the broker must abort the transaction shortly after 2 s.
    log.end_txn(commit=False)
    want = {p: log.end[p] for p in range(PARTITIONS)}
    wait_for(
        "LSO after timeout",
        lambda: list_latest(bootstrap, topic, IsolationLevel.READ_COMMITTED),
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

    err = fence_error(producer)
    assert err.fatal(), err
    assert err.code() in FENCED, err


def test_transaction_timeout_above_broker_max(bootstrap: str) -> None:
    # transaction.max.timeout.ms: Kafka default 900000 (15 min); one millisecond more is refused.
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"ck-big-timeout-{uuid.uuid4()}",
            "transaction.timeout.ms": 900_001,
        }
    )
    with pytest.raises(KafkaException) as exc:
        producer.init_transactions(DEADLINE_S)
    assert exc.value.args[0].code() == KafkaError.INVALID_TRANSACTION_TIMEOUT == ERR_INVALID_TRANSACTION_TIMEOUT

    at_limit = txn_producer(bootstrap, **{"transaction.timeout.ms": 900_000})
    at_limit.begin_transaction()
    at_limit.abort_transaction(DEADLINE_S)


def test_many_small_transactions(bootstrap: str, make_topic) -> None:
    topic = make_topic("ck-txn-many", PARTITIONS)
    n_txns, per_txn = 200, 5
    log = TxnLog(PARTITIONS, make_records(n_txns * per_txn, seed=16))
    producer = txn_producer(bootstrap)
    delivered: list[Delivered] = []
    for t in range(n_txns):
        chunk = range(t * per_txn, (t + 1) * per_txn)
        producer.begin_transaction()
        delivered += send(producer, topic, log, chunk)
        producer.commit_transaction(DEADLINE_S)
        log.transaction(chunk, commit=True)
    check_delivered(log, delivered)
    consumed = consume(bootstrap, topic, n_txns * per_txn, "read_committed")
    assert len(consumed) == n_txns * per_txn
    check_consumed(log, consumed, read_committed=True)
    wait_stable(bootstrap, topic, log)
