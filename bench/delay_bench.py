"""P10: delayed delivery (issue 26): the DelayService's forwarding rate and the lateness of delayed records under load.

``forwarding_rate``: ``n`` records are scheduled into the delay levels while no DelayService runs (the broker's own is
off), all due before the service starts; then ``oncelog delay-service`` starts as its own process; the figure is
``n`` over the time from the first record's arrival at the target (read_committed) to the last (the time from the
service's start, process start-up included, is reported beside it).
``lateness``: a broker with its own DelayService; records with delays of 1 to 5 s are produced at ``rate`` per second
for ``seconds``; a read_committed consumer of the target measures each arrival minus its due time.

Usage: python bench/delay_bench.py [--records N] [--rate R] [--seconds S]
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from oncelog.client import TopicPartition  # noqa: E402
from oncelog.client.sync import Admin, Consumer, Producer  # noqa: E402

from tests.support.broker import BrokerProcess, process_cpu_seconds  # noqa: E402

TARGET = "delayed-target"


@dataclass(frozen=True)
class ForwardRate:
    records: int
    seconds: float  # from the service's start (process start-up included) to the last arrival
    records_per_s: float  # from the first arrival to the last: the forwarding rate itself
    cpu_s_per_1000: float  # the service process's CPU time (user + system, start-up included) per 1,000 records
    broker_cpu_s_per_1000: float  # the broker's CPU time while the service ran, per 1,000 records


@dataclass(frozen=True)
class Lateness:
    records: int
    offered_per_s: float
    p50_ms: float
    p99_ms: float
    max_ms: float
    entries_per_record: float  # records appended to the delay levels per delivered record (1 + hops between levels)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _drain(bootstrap: str, expected: int, deadline_s: float, on_record=None) -> int:
    """Read the target read_committed until ``expected`` records arrived (or the deadline); returns the count."""
    got = 0
    with Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(TARGET, 0)])
        end = time.monotonic() + deadline_s
        while got < expected and time.monotonic() < end:
            for records in consumer.getmany(timeout_ms=200).values():
                now = _now_ms()
                got += len(records)
                if on_record is not None:
                    for record in records:
                        on_record(record, now)
    return got


def _level_entries(bootstrap: str) -> int:
    """Records (not transaction markers) in every delay-level topic, read read_committed to their ends."""
    with Admin(bootstrap) as admin:
        topics = admin.list_topics(internal=True)
    tps = [
        TopicPartition(t, p) for t, n in topics.items() if t.startswith("__delay-") and t != "__delay-cancel"
        for p in range(n)
    ]  # fmt: skip
    if not tps:
        return 0
    with Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest") as consumer:
        consumer.assign(tps)
        ends = consumer.list_offsets(tps, -1)
        count = 0
        while any(consumer.position(tp) < end for tp, end in ends.items()):
            for records in consumer.getmany(timeout_ms=200).values():
                count += len(records)
        return count


def forwarding_rate(n: int) -> ForwardRate:
    with tempfile.TemporaryDirectory(prefix="oncelog-delay-bench-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data", settings={"delay.service.enable": "false"})
        service = None
        try:
            broker.start()
            with Producer(broker.bootstrap, linger_ms=20) as producer:
                producer.send(TARGET, b"create")  # the target exists before the service starts
                for i in range(n):  # into the 1s level, each due 1 s after it is sent
                    producer.send(TARGET, b"%d" % i, delay_ms=1000)
                producer.flush()
            time.sleep(1.2)  # every record due before the service starts
            started = time.monotonic()
            broker_cpu = broker.cpu_seconds()
            command = [str(Path(sys.executable).with_name("oncelog")), "delay-service", "-b", broker.bootstrap]
            service = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            arrivals: list[float] = []

            def arrived(record, _now: int) -> None:
                if record.value != b"create":
                    arrivals.append(time.monotonic())

            _drain(broker.bootstrap, n + 1, 600, arrived)
            cpu, broker_cpu = process_cpu_seconds(service.pid), broker.cpu_seconds() - broker_cpu
            span = arrivals[-1] - arrivals[0] if len(arrivals) > 1 else float("nan")
            per_1000 = 1000 / max(1, len(arrivals))
            return ForwardRate(
                len(arrivals), arrivals[-1] - started, len(arrivals) / span, cpu * per_1000, broker_cpu * per_1000
            )
        finally:
            if service is not None:
                service.terminate()
                service.wait(15)
            broker.close()


def lateness(rate: int, seconds: float) -> Lateness:
    count = int(rate * seconds)
    with tempfile.TemporaryDirectory(prefix="oncelog-delay-bench-") as tmp:
        broker = BrokerProcess(Path(tmp) / "data")
        try:
            broker.start()
            with Producer(broker.bootstrap, linger_ms=5) as producer:  # warm up: the levels exist, service running
                for delay in (300, 1000, 5000):
                    producer.send("warm-up", b"x", delay_ms=delay)
                producer.send(TARGET, b"create")
                producer.flush()
            time.sleep(7)
            late: list[int] = []

            def record_lateness(record, now: int) -> None:
                if record.value != b"create":
                    late.append(now - int(record.value))

            reader = threading.Thread(target=_drain, args=(broker.bootstrap, count + 1, seconds + 60, record_lateness))
            reader.start()
            rng = random.Random(10)
            started = time.monotonic()
            with Producer(broker.bootstrap, linger_ms=5) as producer:
                for i in range(count):
                    pause = started + i / rate - time.monotonic()
                    if pause > 0:
                        time.sleep(pause)
                    due = _now_ms() + rng.randrange(1000, 5000)
                    producer.send(TARGET, b"%d" % due, deliver_at_ms=due)
                producer.flush()
            offered = count / (time.monotonic() - started)
            reader.join()
            ordered = sorted(late)
            entries = (_level_entries(broker.bootstrap) - 3) / max(1, len(ordered))  # less the 3 warm-up records
            if not ordered:
                return Lateness(0, offered, float("nan"), float("nan"), float("nan"), float("nan"))
            return Lateness(
                len(ordered),
                offered,
                ordered[len(ordered) // 2],
                ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))],
                ordered[-1],
                entries,
            )
        finally:
            broker.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--rate", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    print(forwarding_rate(args.records))
    print(lateness(args.rate, args.seconds))


if __name__ == "__main__":
    main()
