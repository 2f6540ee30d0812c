"""P2: MB/s of 10 KB records into one partition's log, in ~1 MB batches, acks=all.

The client is ``wire_pump`` (pre-built batches, pipelined on one connection), so the figure is the broker's append
rate rather than a client's produce loop. Run once in page-cache mode (log.flush.interval.messages = Long.MAX) and
once in fsync-before-ack mode (oncelog's default); ``run_kafka`` does the same against Apache Kafka
(``tests/support/kafka_peer.py``) in the same durability.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from oncelog.storage.config import LONG_MAX

from bench import wire_pump
from bench.txn_bench import create_topic
from tests.support.broker import BrokerProcess
from tests.support.kafka_peer import KafkaPeer
from tests.support.wire import Record, encode_batch

TOPIC = "bench-p2"
RECORD_BYTES = 10_000
RECORDS_PER_BATCH = 100  # ~1 MB batches, under message.max.bytes (1048588)
INFLIGHT = 8
PAGECACHE_SETTINGS = {"log.flush.interval.messages": str(LONG_MAX)}


@dataclass(frozen=True)
class LogWriteResult:
    mode: str
    batches: int
    batch_bytes: int
    seconds: float
    mb_s: float
    broker_cpu_s: float


def now_ms() -> int:
    return int(time.time() * 1000)


def make_batch() -> bytes:
    """One uncompressed v2 batch of RECORDS_PER_BATCH random RECORD_BYTES values, no producer id, timestamped now
    (a timestamp older than log.roll.ms would make the broker roll a segment on every append, as Kafka does)."""
    records = [Record(None, os.urandom(RECORD_BYTES)) for _ in range(RECORDS_PER_BATCH)]
    return encode_batch(records, base_timestamp=now_ms())


def run(mode: str, total_bytes: int) -> LogWriteResult:
    """Start a broker in ``mode`` ("pagecache" or "fsync"), warm it up, then time ``total_bytes`` of batches."""
    settings = PAGECACHE_SETTINGS if mode == "pagecache" else {}
    with BrokerProcess(settings=settings) as broker:
        return _pump(broker, mode, total_bytes)


def run_kafka(mode: str, total_bytes: int) -> LogWriteResult:
    """``run`` against Apache Kafka: ``log.flush.interval.messages=1`` for "fsync", Kafka's default for "pagecache"."""
    with KafkaPeer(fsync=mode == "fsync") as kafka:
        return _pump(kafka, mode, total_bytes)


def _pump(broker: BrokerProcess | KafkaPeer, mode: str, total_bytes: int) -> LogWriteResult:
    """Create the topic, warm up, then time ``total_bytes`` of batches into ``broker``."""
    batch = make_batch()
    body = wire_pump.produce_body(TOPIC, 0, batch)
    count = max(1, total_bytes // len(batch))
    create_topic(broker.bootstrap, TOPIC, 1)
    wire_pump.pump(broker.bootstrap, wire_pump.repeat(body, len(batch), min(64, count)), inflight=INFLIGHT)
    cpu0 = broker.cpu_seconds()
    res = wire_pump.pump(broker.bootstrap, wire_pump.repeat(body, len(batch), count), inflight=INFLIGHT)
    cpu = broker.cpu_seconds() - cpu0
    return LogWriteResult(mode, res.requests, res.batch_bytes, res.seconds, res.mb_per_s, cpu)
