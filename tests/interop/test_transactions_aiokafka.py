"""Interop: aiokafka transactional producer and read_committed consumer.

Same scenarios as test_transactions_confluent.py. aiokafka speaks old versions of the transaction APIs
(EndTxn/AddPartitionsToTxn v0), so the broker must report fencing as INVALID_PRODUCER_EPOCH (47) there, which
aiokafka turns into ProducerFenced. Each test drives its own ``asyncio.run`` (the suite itself runs trio).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import InvalidTransactionTimeout, KafkaError, ProducerFenced
from support.broker import BrokerProcess
from support.dataset import Consumed, Delivered, make_records
from support.txn import (
    ERR_INVALID_TRANSACTION_TIMEOUT,
    TXN_BROKER_SETTINGS,
    TxnLog,
    check_consumed,
    check_delivered,
    round_robin,
)

PARTITIONS = 3
DEADLINE_S = 30.0
QUIET_S = 0.7
CREATE_TIME = 0


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


def records(n: int, seed: int):
    """aiokafka refuses a record with both key and value null, and sends null header values as empty."""
    return make_records(n, seed=seed, null_header_values=False, null_key_and_value=False)


@contextlib.asynccontextmanager
async def txn_producer(bootstrap: str, txn_id: str | None = None, **conf: object) -> AsyncIterator[AIOKafkaProducer]:
    """A started transactional producer (start() runs InitProducerId); stopped on exit, even if fenced."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        transactional_id=txn_id or f"ak-txn-{uuid.uuid4()}",
        linger_ms=5,
        **conf,
    )
    try:
        await asyncio.wait_for(producer.start(), DEADLINE_S)
        yield producer
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(producer.stop(), 5)


async def send(producer: AIOKafkaProducer, topic: str, log: TxnLog, indexes: range) -> list[Delivered]:
    """Send ``log.records[i]`` to its round-robin partition for each index and await every result."""
    futures = []
    for i in indexes:
        rec = log.records[i]
        futures.append(
            await producer.send(
                topic,
                key=rec.key,
                value=rec.value,
                headers=list(rec.headers),
                partition=round_robin(i, log.partitions),
                timestamp_ms=rec.timestamp_ms,
            )
        )
    metas = await asyncio.wait_for(asyncio.gather(*futures), DEADLINE_S)
    return [Delivered(i, md.partition, md.offset) for i, md in zip(indexes, metas, strict=True)]


async def plain_send(bootstrap: str, topic: str, log: TxnLog, indexes: range) -> list[Delivered]:
    """Send with a non-transactional idempotent producer."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, linger_ms=5)
    await producer.start()
    try:
        return await send(producer, topic, log, indexes)
    finally:
        await producer.stop()


@contextlib.asynccontextmanager
async def assigned_consumer(bootstrap: str, topic: str, isolation: str) -> AsyncIterator[AIOKafkaConsumer]:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level=isolation,
    )
    await consumer.start()
    try:
        consumer.assign([TopicPartition(topic, p) for p in range(PARTITIONS)])
        yield consumer
    finally:
        await consumer.stop()


async def consume(bootstrap: str, topic: str, expected: int, isolation: str) -> list[Consumed]:
    """Read every partition from the beginning until ``expected`` records arrived and ``QUIET_S`` passed
    without another one."""
    async with assigned_consumer(bootstrap, topic, isolation) as consumer:
        tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
        await consumer.seek_to_beginning(*tps)
        out: list[Consumed] = []
        end = time.monotonic() + DEADLINE_S
        quiet_until = None
        while quiet_until is None or time.monotonic() < quiet_until:
            assert time.monotonic() < end, f"{isolation}: consumed {len(out)}/{expected} in {DEADLINE_S}s"
            batches = await consumer.getmany(*tps, timeout_ms=200, max_records=2000)
            for tp_records in batches.values():
                for m in tp_records:
                    ts = m.timestamp if m.timestamp_type == CREATE_TIME else -1
                    out.append(Consumed(m.partition, m.offset, m.key, m.value, tuple(m.headers or ()), ts))
            if quiet_until is None and len(out) >= expected:
                quiet_until = time.monotonic() + QUIET_S
        return out


async def end_offsets(bootstrap: str, topic: str, isolation: str) -> dict[int, int]:
    """``AIOKafkaConsumer.end_offsets`` (ListOffsets latest) under ``isolation``."""
    async with assigned_consumer(bootstrap, topic, isolation) as consumer:
        got = await consumer.end_offsets([TopicPartition(topic, p) for p in range(PARTITIONS)])
        return {tp.partition: off for tp, off in got.items()}


async def wait_stable(bootstrap: str, topic: str, log: TxnLog, deadline_s: float = 15.0) -> float:
    """Wait until read_committed's end offset is ``log``'s LSO (returns the seconds waited); read_uncommitted's
    must then be the log end offset."""
    want = {p: log.lso(p) for p in range(PARTITIONS)}
    start = time.monotonic()
    while (got := await end_offsets(bootstrap, topic, "read_committed")) != want:
        assert time.monotonic() - start < deadline_s, f"LSO still {got}, expected {want}"
        await asyncio.sleep(0.1)
    waited = time.monotonic() - start
    assert await end_offsets(bootstrap, topic, "read_uncommitted") == {p: log.end[p] for p in range(PARTITIONS)}
    return waited


def test_commit_visible_with_marker_gaps(bootstrap: str, make_topic) -> None:
    topic = make_topic("ak-txn-commit", PARTITIONS)
    log = TxnLog(PARTITIONS, records(600, 31))

    async def run() -> None:
        delivered = []
        async with txn_producer(bootstrap) as producer:
            for chunk in (range(0, 300), range(300, 600)):
                async with producer.transaction():
                    delivered += await send(producer, topic, log, chunk)
                log.transaction(chunk, commit=True)
        check_delivered(log, delivered)
        check_consumed(log, await consume(bootstrap, topic, 600, "read_committed"), read_committed=True)
        await wait_stable(bootstrap, topic, log)
        assert log.end == {0: 202, 1: 202, 2: 202}

    asyncio.run(run())


def test_abort_hidden_from_read_committed(bootstrap: str, make_topic) -> None:
    topic = make_topic("ak-txn-abort", PARTITIONS)
    log = TxnLog(PARTITIONS, records(400, 32))

    async def run() -> None:
        async with txn_producer(bootstrap) as producer:
            await producer.begin_transaction()
            delivered = await send(producer, topic, log, range(0, 200))
            await producer.abort_transaction()
            log.transaction(range(0, 200), commit=False)
            await producer.begin_transaction()
            delivered += await send(producer, topic, log, range(200, 400))
            await producer.commit_transaction()
            log.transaction(range(200, 400), commit=True)
        check_delivered(log, delivered)
        check_consumed(log, await consume(bootstrap, topic, 200, "read_committed"), read_committed=True)
        check_consumed(log, await consume(bootstrap, topic, 400, "read_uncommitted"), read_committed=False)
        await wait_stable(bootstrap, topic, log)

    asyncio.run(run())


def test_open_transaction_holds_lso(bootstrap: str, make_topic) -> None:
    topic = make_topic("ak-txn-lso", PARTITIONS)
    log = TxnLog(PARTITIONS, records(90, 33))

    async def run() -> None:
        delivered = await plain_send(bootstrap, topic, log, range(0, 30))
        log.write(range(0, 30), transactional=False)
        async with txn_producer(bootstrap) as producer:
            await producer.begin_transaction()
            delivered += await send(producer, topic, log, range(30, 60))
            log.write(range(30, 60), transactional=True)
            delivered += await plain_send(bootstrap, topic, log, range(60, 90))
            log.write(range(60, 90), transactional=False)
            check_delivered(log, delivered)

            assert {p: log.lso(p) for p in range(PARTITIONS)} == {0: 10, 1: 10, 2: 10}
            await wait_stable(bootstrap, topic, log)
            check_consumed(log, await consume(bootstrap, topic, 30, "read_committed"), read_committed=True)
            check_consumed(log, await consume(bootstrap, topic, 90, "read_uncommitted"), read_committed=False)

            await producer.commit_transaction()
            log.end_txn(commit=True)
        await wait_stable(bootstrap, topic, log)
        check_consumed(log, await consume(bootstrap, topic, 90, "read_committed"), read_committed=True)

    asyncio.run(run())


def test_fencing_by_second_producer(bootstrap: str, make_topic) -> None:
    topic = make_topic("ak-txn-fence", PARTITIONS)
    log = TxnLog(PARTITIONS, records(150, 34))
    txn_id = f"ak-fence-{uuid.uuid4()}"

    async def run() -> None:
        async with txn_producer(bootstrap, txn_id) as first:
            await first.begin_transaction()
            delivered = await send(first, topic, log, range(0, 50))
            log.write(range(0, 50), transactional=True)

            async with txn_producer(bootstrap, txn_id) as second:  # aborts first's transaction, new epoch
                log.end_txn(commit=False)

                futures = []
                with contextlib.suppress(KafkaError):  # send() may already refuse
                    for i in range(50, 60):
                        rec = log.records[i]
                        futures.append(
                            await first.send(topic, key=rec.key, value=rec.value, partition=round_robin(i, PARTITIONS))
                        )
                results = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), DEADLINE_S)
                assert all(isinstance(r, KafkaError) for r in results), results  # nothing acknowledged
                with pytest.raises(ProducerFenced):
                    await asyncio.wait_for(first.commit_transaction(), DEADLINE_S)

                async with second.transaction():
                    delivered += await send(second, topic, log, range(100, 150))
                log.transaction(range(100, 150), commit=True)
        check_delivered(log, delivered)
        check_consumed(log, await consume(bootstrap, topic, 50, "read_committed"), read_committed=True)
        await wait_stable(bootstrap, topic, log)

    asyncio.run(run())


def test_timed_out_transaction_aborted_by_broker(bootstrap: str, make_topic) -> None:
    topic = make_topic("ak-txn-timeout", PARTITIONS)
    log = TxnLog(PARTITIONS, records(60, 35))

    async def run() -> None:
        async with txn_producer(bootstrap, transaction_timeout_ms=2000) as producer:
            await producer.begin_transaction()
            delivered = await send(producer, topic, log, range(0, 30))
            log.write(range(0, 30), transactional=True)
            log.end_txn(commit=False)  # what the broker must do by itself after ~2 s
            waited = await wait_stable(bootstrap, topic, log)
            assert waited < 8.0, f"timed-out transaction aborted only after {waited:.1f}s"

            delivered += await plain_send(bootstrap, topic, log, range(30, 60))
            log.write(range(30, 60), transactional=False)
            check_delivered(log, delivered)
            check_consumed(log, await consume(bootstrap, topic, 30, "read_committed"), read_committed=True)
            await wait_stable(bootstrap, topic, log)

            with pytest.raises(ProducerFenced):
                await asyncio.wait_for(producer.commit_transaction(), DEADLINE_S)

    asyncio.run(run())


def test_transaction_timeout_above_broker_max(bootstrap: str) -> None:
    # transaction.max.timeout.ms: Kafka default 900000 (15 min); one millisecond more is refused.
    async def run() -> None:
        with pytest.raises(InvalidTransactionTimeout) as exc:
            async with txn_producer(bootstrap, transaction_timeout_ms=900_001):
                pass
        assert exc.value.errno == ERR_INVALID_TRANSACTION_TIMEOUT
        async with txn_producer(bootstrap, transaction_timeout_ms=900_000) as producer:
            await producer.begin_transaction()
            await producer.abort_transaction()

    asyncio.run(run())
