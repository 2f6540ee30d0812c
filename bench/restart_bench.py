"""P7: seconds from spawning the broker until it serves again after SIGKILL, with a big log and many producer ids.

Fill (fast, page-cache mode so that the fill is not fsync-bound; the data survives SIGKILL in the page cache):
``producers`` idempotent producer ids from InitProducerId, each writing one 1-record batch (sequence 0), spread
evenly among ~1 MB batches without a producer id until the partition holds ``log_bytes``. The fill takes less
than log.flush.offset.checkpoint.interval.ms (60 s), so no recovery point was saved: recovery revalidates the
whole log and rebuilds every producer's state, the worst case. Then SIGKILL, and a restart with oncelog's default
settings. "Serving" = the port accepts and ListOffsets(latest) returns the pre-kill log end offset.

``run_kafka`` does the same against Apache Kafka (``tests/support/kafka_peer.py``): filled in page-cache mode (Kafka's
default), SIGKILLed and restarted on the same log dir (``KafkaPeer.restart``, which keeps the fill's page-cache
setting: the flush setting does not change what recovery reads). In page-cache mode Kafka flushes a segment only
once it rolls (log.segment.bytes, 1 GiB), so its recovery point stays at or near 0 and it too recovers the whole log
after the kill.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import wire_pump
from bench.log_write_bench import PAGECACHE_SETTINGS, make_batch, now_ms
from bench.txn_bench import create_topic
from tests.support.broker import BrokerProcess
from tests.support.kafka_peer import KafkaPeer
from tests.support.wire import Record, WireClient, encode_batch

TOPIC = "bench-p7"
POLL_S = 0.01
SERVE_DEADLINE_S = 300.0
COORDINATOR_LOAD_IN_PROGRESS = 14  # Kafka's error code: retriable
INIT_RETRY_S = 30.0  # how long InitProducerId is retried while the broker answers COORDINATOR_LOAD_IN_PROGRESS


@dataclass(frozen=True)
class RestartResult:
    log_bytes: int
    producers: int
    fill_seconds: float
    log_end_offset: int
    seconds_to_listen: float
    seconds_to_serve: float


def _small_body(pid: int, epoch: int) -> tuple[bytes, int]:
    """A Produce body with one 100 B record as sequence 0 of producer ``pid``, and the batch size."""
    small = encode_batch(
        [Record(None, b"x" * 100)], producer_id=pid, producer_epoch=epoch, base_sequence=0, base_timestamp=now_ms()
    )
    return wire_pump.produce_body(TOPIC, 0, small), len(small)


def _fill(bootstrap: str, log_bytes: int, producers: int) -> None:
    with WireClient(bootstrap) as wc:
        pids = []
        deadline = time.monotonic() + INIT_RETRY_S
        while len(pids) < producers:
            error, pid, epoch = wc.init_producer_id()
            if error == COORDINATOR_LOAD_IN_PROGRESS and time.monotonic() < deadline:
                time.sleep(POLL_S)  # Kafka: no producer id block from the controller yet (retriable)
                continue
            if error:
                raise RuntimeError(f"InitProducerId failed with error {error}")
            pids.append((pid, epoch))
    big = make_batch()
    big_body = wire_pump.produce_body(TOPIC, 0, big)
    bigs = max(1, log_bytes // len(big))

    def bodies() -> Iterator[tuple[bytes, int]]:
        small_per_big = producers / bigs
        due = 0.0
        it = iter(pids)
        for _ in range(bigs):
            yield big_body, len(big)
            due += small_per_big
            while due >= 1:
                pid, epoch = next(it)
                yield _small_body(pid, epoch)
                due -= 1
        for pid, epoch in it:  # rounding leftovers
            yield _small_body(pid, epoch)

    wire_pump.pump(bootstrap, bodies(), inflight=16)


def _log_end(bootstrap: str) -> int:
    with WireClient(bootstrap) as wc:
        error, offset = wc.list_offset(TOPIC, 0)
    if error:
        raise RuntimeError(f"ListOffsets error {error}")
    return offset


def _filled(bootstrap: str, log_bytes: int, producers: int) -> tuple[float, int]:
    """Create the topic and fill it: (seconds the fill took, log end offset)."""
    create_topic(bootstrap, TOPIC, 1)
    t0 = time.perf_counter()
    _fill(bootstrap, log_bytes, producers)
    return time.perf_counter() - t0, _log_end(bootstrap)


def run(log_bytes: int, producers: int) -> RestartResult:
    """Fill, SIGKILL, restart; return the timings (the broker and its data dir are gone afterwards)."""
    with BrokerProcess(settings=PAGECACHE_SETTINGS, start_deadline_s=120) as broker:
        fill_s, end = _filled(broker.bootstrap, log_bytes, producers)
        broker.kill()
        broker.settings = {}  # restart with the defaults (fsync before ack)
        t0 = time.perf_counter()
        broker.start()
        listen_s = time.perf_counter() - t0
        serve_s = _wait_serving(broker.bootstrap, end, t0)
    return RestartResult(log_bytes, producers, fill_s, end, listen_s, serve_s)


def _wait_serving(bootstrap: str, end: int, t0: float) -> float:
    """Poll ListOffsets(latest) until it returns ``end``; seconds since ``t0``."""
    while True:
        try:
            if _log_end(bootstrap) == end:
                return time.perf_counter() - t0
        except (OSError, RuntimeError, AssertionError):
            pass
        if time.perf_counter() - t0 > SERVE_DEADLINE_S:
            raise RuntimeError(f"broker did not serve the pre-kill log end offset within {SERVE_DEADLINE_S:.0f} s")
        time.sleep(POLL_S)


def run_kafka(log_bytes: int, producers: int) -> RestartResult:
    """``run`` against Apache Kafka: the same fill, SIGKILL of its JVM, a restart on the same log dir (timed from
    the kill; "listening" is when Kafka logged that it started and its port accepts)."""
    with KafkaPeer(fsync=False) as kafka:
        fill_s, end = _filled(kafka.bootstrap, log_bytes, producers)
        t0 = time.perf_counter()
        kafka.restart(hard=True)
        listen_s = time.perf_counter() - t0
        serve_s = _wait_serving(kafka.bootstrap, end, t0)
    return RestartResult(log_bytes, producers, fill_s, end, listen_s, serve_s)
