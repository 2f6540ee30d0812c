"""Delayed delivery end to end against a broker subprocess running its DelayService: the bundled producer's
``delay_ms``, a stock confluent-kafka producer writing the header contract, cancellation, TTL expiry while delayed,
and exactly-once delivery across SIGKILLs.

Speed-up: these brokers run with the short levels ``250ms,1s,2s,4s`` (``delay.levels``) instead of the default
ladder, so delays of up to 12 s exercise several moves down the levels in seconds; the code path is the default's.
"""

from __future__ import annotations

import io
import json
import random
import struct
import time
from collections import Counter

import pytest
import trio
from confluent_kafka import Producer as ConfluentProducer
from oncelog.broker.cli import build_parser
from oncelog.broker.delay.service import DelayService
from oncelog.client import Consumer, Producer
from oncelog.client import cli as client_cli
from oncelog.client.dead_letter import DLT_ORIGINAL_TOPIC, REASON_HEADER, dead_letter_headers
from oncelog.client.delay import DELAY_HEADERS, parse_levels
from oncelog.client.processor import process
from oncelog.client.retry import RetryPolicy, failed_attempts
from oncelog.client.types import ConsumerRecord
from support.broker import BrokerProcess

LEVELS = "250ms,1s,2s,4s"
SETTINGS = {"delay.levels": LEVELS, "num.partitions": 3, "group.initial.rebalance.delay.ms": 0}
#: The issue's bound on lateness (delivery time - due time), checked at the 99th percentile.
LATENESS_P99_MS = 1000


def now_ms() -> int:
    return int(time.time() * 1000)


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory):
    proc = BrokerProcess(
        tmp_path_factory.mktemp("delay") / "data", settings={**SETTINGS, "delay.dead.letter.topic": "dead"}
    )
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


async def collect(bootstrap: str, topic: str, expected: int, deadline_s: float, settle_s: float = 0.0):
    """(record, receipt ms) of ``topic`` read_committed from the start until ``expected`` arrived (and ``settle_s``
    more, to see duplicates) or ``deadline_s`` passed."""
    out = []
    async with Consumer(
        bootstrap, isolation_level="read_committed", auto_offset_reset="earliest", fetch_max_wait_ms=50
    ) as consumer:
        consumer.assign(await consumer.partitions_for_topic(topic))
        end = time.monotonic() + deadline_s
        settled_at = None
        while time.monotonic() < end:
            for records in (await consumer.getmany(timeout_ms=100)).values():
                received = now_ms()
                out.extend((record, received) for record in records)
            if len(out) >= expected:
                settled_at = settled_at or time.monotonic() + settle_s
                if time.monotonic() >= settled_at:
                    break
    return out


def p99(values: list[int]) -> int:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


async def warm_up(bootstrap: str, target: str = "warm-up") -> None:
    """Use every level once and wait for delivery: the first use creates the level topics, which the DelayService
    finds within a second and then starts its transactions (creating the broker's internal topics): a one-off cost
    the lateness bound is not about."""
    async with Producer(bootstrap, delay_levels=LEVELS) as producer:
        for delay in (100, 1000, 2000, 4000):
            await producer.send(target, b"%d" % delay, delay_ms=delay)
        await producer.flush()
    assert len(await collect(bootstrap, target, 4, deadline_s=30)) == 4


async def test_mixed_delays_arrive_once_never_early_and_within_a_second(broker: BrokerProcess) -> None:
    rng = random.Random(26)
    count = 1000
    await warm_up(broker.bootstrap)
    async with Producer(broker.bootstrap, delay_levels=LEVELS) as producer:
        for i in range(count):
            delay = rng.randrange(0, 12_000)
            due = now_ms() + delay
            await producer.send("mixed", f"{i}:{due}", f"k{i}", deliver_at_ms=due, headers=[("app", b"x")])
        await producer.flush()
    got = await collect(broker.bootstrap, "mixed", count, deadline_s=40, settle_s=1.5)
    seen = Counter(record.value for record, _ in got)
    assert len(seen) == count and set(seen.values()) == {1}
    lateness = []
    for record, received in got:
        due = int(record.value.split(b":")[1])
        assert received >= due, f"{record.value!r} arrived {due - received} ms early"
        lateness.append(received - due)
        assert dict(record.headers) == {"app": b"x"}  # the delay headers are gone, the producer's stay
        assert record.key == b"k" + record.value.split(b":")[0]
    assert p99(lateness) < LATENESS_P99_MS, sorted(lateness)[-10:]
    print(f"lateness ms: p50 {sorted(lateness)[count // 2]} p99 {p99(lateness)} max {max(lateness)}")


async def test_a_stock_confluent_producer_schedules_through_the_headers(broker: BrokerProcess) -> None:
    producer = ConfluentProducer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    start = now_ms()
    dues = {}
    for i in range(30):
        due = start + 1500 + 100 * i
        dues[b"c%d" % i] = due
        headers = [("oncelog-deliver-at-ms", str(due).encode()), ("oncelog-delay-target", b"stock"), ("h", b"%d" % i)]
        if i % 2:
            headers.append(("oncelog-delay-partition", b"2"))
        producer.produce("__delay-1s", value=b"c%d" % i, key=b"key%d" % i, headers=headers, timestamp=start - i)
    assert producer.flush(15) == 0
    got = await collect(broker.bootstrap, "stock", 30, deadline_s=30, settle_s=1.0)
    assert sorted(record.value for record, _ in got) == sorted(dues)
    for record, received in got:
        i = int(record.value[1:])
        assert received >= dues[record.value]
        assert record.timestamp == start - i  # the original timestamp
        assert dict(record.headers) == {"h": b"%d" % i} and not DELAY_HEADERS & dict(record.headers).keys()
        if i % 2:
            assert record.partition == 2


async def test_cancelled_records_are_not_delivered(broker: BrokerProcess) -> None:
    async with Producer(broker.bootstrap, delay_levels=LEVELS) as producer:
        for i in range(10):
            await producer.send("cancelling", b"r%d" % i, delay_ms=3000, delay_id=f"order-{i}")
        await producer.flush()
        for i in range(0, 10, 2):
            await producer.cancel_delayed(f"order-{i}")
        await producer.flush()
    got = await collect(broker.bootstrap, "cancelling", 5, deadline_s=20, settle_s=3.0)
    assert sorted(record.value for record, _ in got) == [b"r%d" % i for i in range(1, 10, 2)]


async def test_records_expiring_while_delayed_are_dead_lettered(broker: BrokerProcess) -> None:
    async with Producer(broker.bootstrap, delay_levels=LEVELS) as producer:
        await producer.send("ttl-target", b"stale", delay_ms=2500, ttl_ms=1000)
        await producer.send("ttl-target", b"fresh", delay_ms=2500, ttl_ms=60_000)
        await producer.flush()
    delivered = await collect(broker.bootstrap, "ttl-target", 1, deadline_s=20, settle_s=1.0)
    assert [record.value for record, _ in delivered] == [b"fresh"]
    dead = [r for r, _ in await collect(broker.bootstrap, "dead", 1, deadline_s=10) if r.value == b"stale"]
    assert len(dead) == 1
    headers = dict(dead[0].headers)
    assert headers[REASON_HEADER] == b"ttl-expired" and headers[DLT_ORIGINAL_TOPIC].startswith(b"__delay-")


def test_each_record_is_delivered_exactly_once_across_sigkills(tmp_path) -> None:
    """Records due over ~12 s while the broker is SIGKILLed five times (pending and due records at each kill)."""
    count = 400
    broker = BrokerProcess(tmp_path / "data", settings=SETTINGS)
    rng = random.Random(5)
    try:
        broker.start()

        async def produce() -> None:
            async with Producer(broker.bootstrap, delay_levels=LEVELS) as producer:
                for i in range(count):
                    await producer.send("killed", b"%d" % i, b"%d" % i, delay_ms=rng.randrange(500, 12_000))
                await producer.flush()

        trio.run(produce)
        for _ in range(5):
            time.sleep(rng.uniform(1.0, 2.5))
            broker.kill()
            broker.start()
        got = trio.run(collect, broker.bootstrap, "killed", count, 60, 3.0)
        seen = Counter(record.value for record, _ in got)
        duplicates = {value: n for value, n in seen.items() if n > 1}
        assert not duplicates
        assert sorted(seen) == sorted(b"%d" % i for i in range(count))
    finally:
        broker.close()


async def test_the_bundled_consumer_skips_and_dead_letters_expired_records(broker: BrokerProcess) -> None:
    async with Producer(broker.bootstrap) as producer:
        await producer.send("ttl-plain", b"expired", ttl_ms=1, timestamp_ms=now_ms() - 10_000)
        await producer.send("ttl-plain", b"live", ttl_ms=600_000)
        await producer.send("ttl-plain", b"no-ttl")
        await producer.flush()
    async with Consumer(
        broker.bootstrap, auto_offset_reset="earliest", dead_letter_topic="ttl-dead", group_id="ttl-group"
    ) as consumer:
        consumer.assign(await consumer.partitions_for_topic("ttl-plain"))
        values = []
        end = time.monotonic() + 10
        while len(values) < 2 and time.monotonic() < end:
            values += [r.value for records in (await consumer.getmany(timeout_ms=200)).values() for r in records]
    assert sorted(values) == [b"live", b"no-ttl"]
    dead = await collect(broker.bootstrap, "ttl-dead", 1, deadline_s=10)
    assert [record.value for record, _ in dead] == [b"expired"]
    headers = dict(dead[0][0].headers)
    assert headers[REASON_HEADER] == b"ttl-expired" and headers[DLT_ORIGINAL_TOPIC] == b"ttl-plain"
    assert headers["kafka_dlt-original-consumer-group"] == b"ttl-group"


async def test_a_failing_handler_goes_through_each_retry_then_to_the_dead_letter_topic(broker: BrokerProcess) -> None:
    async with Producer(broker.bootstrap) as producer:
        for value in (b"ok", b"flaky", b"poison"):
            await producer.send("orders", value, value, headers=[("trace", b"t-" + value)])
        await producer.flush()
    calls: Counter[bytes] = Counter()

    def handler(record):
        calls[record.value] += 1
        if record.value == b"poison" or (record.value == b"flaky" and calls[b"flaky"] <= 2):
            raise ValueError(f"cannot handle {record.value!r}")
        return [("processed", record.key, record.value.upper())]

    policy = RetryPolicy(delays_ms=(300, 600))
    stats = await process(
        broker.bootstrap,
        ["orders"],
        handler,
        group_id="billing",
        transactional_id="billing-processor",
        policy=policy,
        idle_timeout_ms=4000,
        delay_levels=LEVELS,
    )
    assert calls == {b"ok": 1, b"flaky": 3, b"poison": 3}
    assert (stats.written, stats.retried, stats.dead_lettered) == (2, 4, 1)
    processed = await collect(broker.bootstrap, "processed", 2, deadline_s=10, settle_s=0.5)
    assert sorted(r.value for r, _ in processed) == [b"FLAKY", b"OK"]
    assert all(dict(r.headers) == {"trace": b"t-" + r.value.lower()} for r, _ in processed)
    retried = await collect(broker.bootstrap, "billing-retry", 4, deadline_s=10, settle_s=0.5)
    attempts = sorted((r.value, failed_attempts(r)) for r, _ in retried)
    assert attempts == [(b"flaky", 1), (b"flaky", 2), (b"poison", 1), (b"poison", 2)]
    dead = await collect(broker.bootstrap, "billing-dlt", 1, deadline_s=10, settle_s=0.5)
    assert [r.value for r, _ in dead] == [b"poison"]
    headers = dict(dead[0][0].headers)
    assert struct.unpack(">i", headers["retry_topic-attempts"]) == (3,)
    assert headers[DLT_ORIGINAL_TOPIC] == b"orders" and headers[REASON_HEADER] == b"retries-exhausted"
    assert headers["kafka_dlt-exception-fqcn"] == b"builtins.ValueError"
    assert b"cannot handle" in headers["kafka_dlt-exception-message"] and headers["trace"] == b"t-poison"
    assert headers["kafka_dlt-original-consumer-group"] == b"billing"


async def test_the_service_holds_at_most_max_buffered_records_per_partition(tmp_path) -> None:
    """A DelayService in this process (the broker's own is off), bounded to 50 records per partition, with 3,000
    pending: it never holds more than 50, and still delivers each record once."""
    broker = BrokerProcess(tmp_path / "data", settings={**SETTINGS, "delay.service.enable": "false"})
    count, bound = 3000, 50
    try:
        broker.start()
        service = DelayService(
            broker.bootstrap, parse_levels(LEVELS), transactional_id="bounded", max_buffered_records=bound
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(service.run)
            async with Producer(broker.bootstrap, delay_levels=LEVELS) as producer:
                for i in range(count):
                    await producer.send("bounded", b"%d" % i, delay_ms=4500)
                await producer.flush()
            held = []
            got: list = []

            async def watch() -> None:
                while True:
                    held.append(max(level.buffered for level in service.stats.levels.values()))
                    await trio.sleep(0.05)

            nursery.start_soon(watch)
            got = await collect(broker.bootstrap, "bounded", count, deadline_s=60, settle_s=1.0)
            nursery.cancel_scope.cancel()
        assert max(held) == bound  # it filled up to the bound and never past it
        seen = Counter(record.value for record, _ in got)
        assert len(seen) == count and set(seen.values()) == {1}
    finally:
        broker.close()


async def test_two_services_claiming_the_same_partitions_fence_each_other(tmp_path) -> None:
    """Two DelayServices in this process (the broker's own is off) that both believe they own every delay partition,
    as a deposed leader's service may until it learns: each partition's transactional id is the same for both, so
    each one's initialisation fences the other's producer, and every record is still delivered exactly once."""
    broker = BrokerProcess(tmp_path / "data", settings={**SETTINGS, "delay.service.enable": "false"})
    count = 300
    try:
        broker.start()
        services = [DelayService(broker.bootstrap, parse_levels(LEVELS), transactional_id="twin") for _ in range(2)]
        async with trio.open_nursery() as nursery:
            async with Producer(broker.bootstrap, delay_levels=LEVELS) as producer:
                for i in range(count):
                    await producer.send("twins", b"%d" % i, b"%d" % i, delay_ms=1000 + 20 * i)
                await producer.flush()
            for service in services:
                nursery.start_soon(service.run)
            got = await collect(broker.bootstrap, "twins", count, deadline_s=60, settle_s=2.0)
            nursery.cancel_scope.cancel()
        seen = Counter(record.value for record, _ in got)
        assert {value: n for value, n in seen.items() if n > 1} == {}
        assert len(seen) == count
        assert sum(service.stats.restarts for service in services) > 0  # they did fence each other
    finally:
        broker.close()


def cli(*argv: str) -> str:
    out = io.StringIO()
    args = build_parser().parse_args(list(argv))
    assert client_cli.run(args, stdout=out) == 0
    return out.getvalue()


def test_dlq_show_and_an_exactly_once_replay(broker: BrokerProcess) -> None:
    async def dead_letter() -> None:
        async with Producer(broker.bootstrap) as producer:
            for i in range(3):
                record = ConsumerRecord("replay-orig", 0, 40 + i, 1234 + i, 0, b"k%d" % i, b"v%d" % i, [("app", b"a")])
                headers = dead_letter_headers(record, "retries-exhausted", "boom", group_id="g")
                await producer.send("replay-dlt", record.value, record.key, headers=headers, timestamp_ms=1234 + i)
            await producer.flush()

    trio.run(dead_letter)
    shown = [json.loads(line) for line in cli("dlq", "show", "replay-dlt", "-b", broker.bootstrap).splitlines()]
    assert sorted((row["original_topic"], row["original_offset"], row["reason"]) for row in shown) == [
        ("replay-orig", 40 + i, "retries-exhausted") for i in range(3)
    ]
    first = cli("dlq", "replay", "replay-dlt", "-b", broker.bootstrap, "--idle-timeout-ms", "1500")
    again = cli("dlq", "replay", "replay-dlt", "-b", broker.bootstrap, "--idle-timeout-ms", "1500")
    assert first.startswith("replayed 3 records") and again.startswith("replayed 0 records")
    got = trio.run(collect, broker.bootstrap, "replay-orig", 3, 10, 0.5)
    assert sorted((r.value, r.timestamp, tuple(r.headers)) for r, _ in got) == [
        (b"v%d" % i, 1234 + i, (("app", b"a"),)) for i in range(3)
    ]


def test_delay_stats_lists_each_level_with_its_pending_records(broker: BrokerProcess) -> None:
    trio.run(warm_up, broker.bootstrap, "stats-warm-up")  # every level used and emptied
    lines = cli("delay", "stats", "-b", broker.bootstrap).splitlines()
    assert lines[0].split("\t") == ["LEVEL", "PENDING", "LAST-FORWARD-MS", "LAST-MAX-LATENESS-MS"]
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in lines[1:]}
    assert list(rows) == ["__delay-250ms", "__delay-1s", "__delay-2s", "__delay-4s"]
    assert all(pending == "0" for pending, _, _ in rows.values())
    assert all(int(last) > 0 for _, last, _ in rows.values())


def test_copy_retries_a_failing_transform_then_dead_letters(
    broker: BrokerProcess, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``oncelog copy --retry-delays-ms``: a record the transform keeps failing on is retried twice, then
    dead-lettered; the others are copied once."""
    (tmp_path / "delay_transform_mod.py").write_text(
        "def shout(record):\n"
        "    if record.value == b'bad':\n"
        "        raise RuntimeError('bad record')\n"
        "    return record.value.upper()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))

    async def produce() -> None:
        async with Producer(broker.bootstrap) as producer:
            for value in (b"a", b"bad", b"b"):
                await producer.send("copy-in", value)
            await producer.flush()

    trio.run(produce)
    b = ["-b", broker.bootstrap]
    out = cli(
        "copy", "copy-in", "copy-out", "--group", "copier", "--transform", "delay_transform_mod:shout",
        "--retry-delays-ms", "300,300", "--idle-timeout-ms", "4000", "--delay-levels", LEVELS, *b,
    )  # fmt: skip
    assert out == "copied 5 records, wrote 2, retried 2, dead-lettered 1\n"
    copied = trio.run(collect, broker.bootstrap, "copy-out", 2, 10, 0.5)
    assert sorted(r.value for r, _ in copied) == [b"A", b"B"]
    dead = trio.run(collect, broker.bootstrap, "copier-dlt", 1, 10, 0.5)
    assert [r.value for r, _ in dead] == [b"bad"]
    assert dict(dead[0][0].headers)["kafka_dlt-exception-message"] == b"RuntimeError: bad record"
