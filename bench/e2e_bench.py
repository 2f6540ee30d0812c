"""P5: end-to-end latency, acks=all producer -> read_committed consumer, at a fixed rate.

The producer (confluent-kafka, idempotent, acks=all, linger.ms=0) runs in its own process and writes
``perf_counter_ns()`` (CLOCK_MONOTONIC, shared by every process on the host) into the first 8 bytes of each 100 B
payload; a rate limiter releases records in step with the wall clock (never ahead of schedule). The consumer
(confluent-kafka, assign, no group, isolation.level=read_committed) runs in this process and computes receive time
minus send time for every record. The first ``WARMUP_S`` of records are not counted.
"""

from __future__ import annotations

import multiprocessing as mp
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition

from bench.machine import percentile

TOPIC = "bench-p5"
RECORD_SIZE = 100
WARMUP_S = 1.0
PRODUCER_CONF = {"acks": "all", "enable.idempotence": True, "linger.ms": 0}
CONSUMER_CONF = {
    "group.id": "oncelog-bench-unused",  # required by the client; no group APIs are used (assign only)
    "enable.auto.commit": False,
    "isolation.level": "read_committed",
    # Short, so that librdkafka's mock (which answers a fetch only when this expires, with no wake-up on new
    # data) gives a usable reference; oncelog answers a waiting fetch as soon as the high watermark moves.
    "fetch.wait.max.ms": 10,
}


@dataclass(frozen=True)
class E2eResult:
    rate: int
    sent: int
    measured: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    latencies_ms: list[float]


def _producer_proc(bootstrap: str, rate: int, seconds: float, go: object, out: object) -> None:
    """Produce ``rate`` records/s for ``seconds`` after ``go`` is set; put (sent, errors) on ``out``."""
    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER_CONF})
    producer.list_topics(TOPIC, timeout=10)
    pad = bytes(RECORD_SIZE - 8)
    errors: list[str] = []

    def cb(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    go.wait()  # type: ignore[attr-defined]
    start = time.perf_counter()
    sent = 0
    total = int(rate * seconds)
    while sent < total:
        due = min(total, int((time.perf_counter() - start) * rate) + 1)
        while sent < due:
            producer.produce(TOPIC, struct.pack(">q", time.perf_counter_ns()) + pad, partition=0, on_delivery=cb)
            sent += 1
        producer.poll(0)
        time.sleep(0.0002)
    producer.flush(30)
    out.put((sent, errors[:3]))  # type: ignore[attr-defined]


def run(bootstrap: str, rate: int, seconds: float) -> E2eResult:
    """Measure against ``bootstrap`` (TOPIC with one partition must exist)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, **CONSUMER_CONF})
    ctx = mp.get_context("spawn")
    go, out = ctx.Event(), ctx.Queue()
    proc = ctx.Process(target=_producer_proc, args=(bootstrap, rate, seconds, go, out))
    proc.start()
    try:
        consumer.assign([TopicPartition(TOPIC, 0, OFFSET_END)])
        consumer.poll(1.0)  # fetch once (nothing there yet) so the consumer is in place before the producer starts
        go.set()
        total = int(rate * seconds)
        received = 0
        lat_ns: list[int] = []
        first_ns: int | None = None
        deadline = time.monotonic() + seconds + 60
        while received < total and time.monotonic() < deadline:
            # poll() returns as soon as one record is there; consume(n, t) would wait for n records or t.
            m = consumer.poll(0.2)
            now = time.perf_counter_ns()
            if m is None:
                continue
            if m.error() is not None:
                raise RuntimeError(f"consumer error: {m.error()}")
            sent_ns = struct.unpack_from(">q", m.value())[0]
            first_ns = sent_ns if first_ns is None else first_ns
            received += 1
            if sent_ns - first_ns >= WARMUP_S * 1e9:
                lat_ns.append(now - sent_ns)
        sent, errors = out.get(timeout=60)
        proc.join(30)
    finally:
        consumer.close()
        if proc.is_alive():
            proc.kill()
            proc.join(5)
    if errors or received != sent:
        raise RuntimeError(f"P5: sent {sent}, received {received}, producer errors {errors}")
    lat_ms = [v / 1e6 for v in lat_ns]
    return E2eResult(rate, sent, len(lat_ms), percentile(lat_ms, 50), percentile(lat_ms, 99), max(lat_ms), lat_ms)
