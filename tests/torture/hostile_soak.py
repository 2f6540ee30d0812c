"""Long soak of a live broker under mixed load: well-behaved producers and consumers measuring their latency, with
hostile clients among them replaying #23's connection, decoding and fetch cases. Run by hand, not in CI:

    .venv/bin/python tests/torture/hostile_soak.py --connections 1000 --minutes 10

First an unloaded baseline (the well-behaved clients alone), then the loaded phase: ``--connections`` in all,
most of them hostile connections held open (frames announced and never sent, fetches parked on a partition listed
20,000 times, fetches of a partition listed 100 times never read), a share of them replaced every second, plus
hostile bursts (4M-name and 90k-name Metadata requests, a topic named 20,000 times, malformed requests, repeated
partitions in Fetch). Every ``--report-s`` it prints the broker's RSS and the well-behaved clients' p99 latency;
at the end the loaded p99 against the baseline, the RSS at the start and end of the loaded phase, and whether
every acknowledged record was read back (nothing acknowledged lost).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import random
import socket
import struct
import sys
import threading
import time
from collections import defaultdict
from multiprocessing.synchronize import Event as EventType
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from oncelog.protocol import ApiKey
from support.broker import BrokerProcess
from support.hostile import (
    FETCH_VERSION,
    Wire,
    batch_of,
    fetch_body,
    frame,
    header_bytes,
    metadata_frame,
    metadata_of_empty_names,
    rss_mb,
)

TOPIC = "soak"
BIG_TOPIC = "soak-big"
WIDE_TOPIC = "soak-wide"
PARTITIONS = 4
_SIZE = struct.Struct(">i")


class Latencies:
    """Latencies of the well-behaved clients' requests, by kind, since the last ``take``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._samples: dict[str, list[float]] = defaultdict(list)

    def add(self, kind: str, seconds: float) -> None:
        with self._lock:
            self._samples[kind].append(seconds)

    def take(self) -> dict[str, list[float]]:
        with self._lock:
            samples, self._samples = self._samples, defaultdict(list)
        return samples


def p99(values: list[float]) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def next_offset(records: bytes, offset: int) -> tuple[int, int]:
    """The offset after the whole batches in ``records`` and how many records they hold."""
    pos = count = 0
    while pos + 61 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        if pos + 12 + length > len(records):
            break
        (last_delta,) = struct.unpack_from(">i", records, pos + 23)
        (in_batch,) = struct.unpack_from(">i", records, pos + 57)
        offset = base + last_delta + 1
        count += in_batch
        pos += 12 + length
    return offset, count


class WellBehaved:
    """Producers (acks=all, small batches) and consumers (fetching what they produce) on ``TOPIC``."""

    def __init__(self, port: int, latencies: Latencies) -> None:
        self.port = port
        self.latencies = latencies
        self.stop = threading.Event()
        self.acked = [0] * PARTITIONS
        self.consumed = [0] * PARTITIONS
        self.errors = 0
        self.produced = threading.Event()  # every producer has stopped: acked is final
        self._producers = [threading.Thread(target=self._produce, args=(p,), daemon=True) for p in range(PARTITIONS)]
        self._consumers = [threading.Thread(target=self._consume, args=(p,), daemon=True) for p in range(PARTITIONS)]

    def start(self) -> None:
        for thread in self._producers + self._consumers:
            thread.start()

    def join(self) -> None:
        self.stop.set()
        for thread in self._producers:
            thread.join(timeout=120)
        self.produced.set()
        for thread in self._consumers:
            thread.join(timeout=120)

    def _produce(self, partition: int) -> None:
        with Wire(self.port, timeout=120) as wire:
            while not self.stop.is_set():
                started = time.monotonic()
                error = wire.produce(TOPIC, partition, batch_of(400, records=4))
                self.latencies.add("produce", time.monotonic() - started)
                if error == 0:
                    self.acked[partition] += 4
                else:
                    self.errors += 1
                time.sleep(0.01)

    def _consume(self, partition: int) -> None:
        offset = 0
        with Wire(self.port, timeout=120) as wire:
            while not self.produced.is_set() or self.consumed[partition] < self.acked[partition]:
                started = time.monotonic()
                body = fetch_body(TOPIC, [partition], offset=offset, max_bytes=1 << 20, partition_max_bytes=1 << 20)
                answer = wire.request(ApiKey.FETCH, FETCH_VERSION, body)
                self.latencies.add("fetch", time.monotonic() - started)
                offset, count = next_offset(bytes(answer.responses[0].partitions[0].records or b""), offset)
                self.consumed[partition] += count
                time.sleep(0.01)
                if self.produced.is_set() and not count:
                    time.sleep(0.1)


class Holders:
    """Hostile connections held open, ``count`` of them, a share replaced every second."""

    KINDS = ("loris", "loris", "parked", "parked", "unread")

    def __init__(self, port: int, count: int, kinds: list[str] | None = None) -> None:
        self.port = port
        self.kinds = tuple(kinds) if kinds else self.KINDS
        self.count = count
        self.stop = threading.Event()
        self.opened = 0
        self._held: list[socket.socket] = []
        self._parked = frame(
            ApiKey.FETCH, FETCH_VERSION, fetch_body(TOPIC, [0] * 20_000, max_wait_ms=30_000, min_bytes=1 << 30)
        )
        self._unread = frame(ApiKey.FETCH, FETCH_VERSION, fetch_body(BIG_TOPIC, [0] * 100)) * 2
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _open(self) -> None:
        kind = self.kinds[self.opened % len(self.kinds)]
        sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        with contextlib.suppress(OSError):
            if kind == "loris":
                sock.sendall(_SIZE.pack(8_388_608) + header_bytes(ApiKey.PRODUCE, 3))
            elif kind == "parked":
                sock.sendall(self._parked)
            else:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.settimeout(2)
                sock.sendall(self._unread)
        self._held.append(sock)
        self.opened += 1

    def _run(self) -> None:
        while len(self._held) < self.count and not self.stop.is_set():
            self._open()
        while not self.stop.wait(1.0):
            for _ in range(max(1, self.count // 50)):
                self._held.pop(random.randrange(len(self._held))).close()
                self._open()

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self.stop.set()
        self._thread.join(timeout=60)
        for sock in self._held:
            sock.close()


class Bursts:
    """Hostile requests sent over and over from a few threads."""

    def __init__(self, port: int, threads: int, kinds: list[str] | None = None) -> None:
        self.port = port
        self.stop = threading.Event()
        self.sent: dict[str, int] = defaultdict(int)
        self._frames = {
            "4M_names": (metadata_of_empty_names(4_000_000), "closed"),
            "90k_names": (metadata_of_empty_names(90_000), "answer"),
            "topic_x20000": (metadata_frame([WIDE_TOPIC] * 20_000), "answer"),
            "fetch_dup_x100": (frame(ApiKey.FETCH, FETCH_VERSION, fetch_body(BIG_TOPIC, [0] * 100)), "answer"),
            "malformed": (self._malformed(), "closed"),
        }
        if kinds:
            self._frames = {k: v for k, v in self._frames.items() if k in kinds}
        self._threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(threads)]

    @staticmethod
    def _malformed() -> bytes:
        body = header_bytes(ApiKey.METADATA, 1) + _SIZE.pack(5)
        return _SIZE.pack(len(body)) + body

    def _run(self, seed: int) -> None:
        rng = random.Random(seed)
        names = list(self._frames)
        while not self.stop.is_set():
            name = rng.choice(names)
            data, expect = self._frames[name]
            with contextlib.suppress(OSError), Wire(self.port, timeout=60) as wire:
                wire.send(data)
                if expect == "closed":
                    wire.closed_by_broker(timeout=60)
                else:
                    wire.read_frame()
            self.sent[name] += 1
            self.stop.wait(0.2)

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def join(self) -> None:
        self.stop.set()
        for thread in self._threads:
            thread.join(timeout=120)


def pin(pid: int, cpus: set[int]) -> None:
    """Bind every thread of process ``pid`` and of its child processes to ``cpus``."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            os.sched_setaffinity(int(task.name), cpus)
        with contextlib.suppress(OSError):
            for child in (task / "children").read_text().split():
                pin(int(child), cpus)


def run_hostile(
    port: int,
    holders_count: int,
    burst_threads: int,
    kinds: tuple[list[str] | None, list[str] | None],
    cpus: set[int] | None,
    stop: EventType,
    results: multiprocessing.Queue,
) -> None:
    """The hostile side, in a process of its own: its threads (building and reading megabyte frames) must not take
    the well-behaved clients' interpreter lock, or their measured latency would be the harness's, not the broker's.
    With ``cpus`` it runs on those CPUs only."""
    if cpus:
        os.sched_setaffinity(0, cpus)
    holders = Holders(port, holders_count, kinds[0])
    bursts = Bursts(port, burst_threads, kinds[1])
    holders.start()
    bursts.start()
    stop.wait()
    bursts.join()
    holders.join()
    results.put((holders.opened, dict(bursts.sent)))


def report(label: str, latencies: Latencies, broker: BrokerProcess, elapsed: float) -> dict[str, list[float]]:
    samples = latencies.take()
    parts = " ".join(f"{kind} p99={p99(v) * 1000:.1f}ms n={len(v)}" for kind, v in sorted(samples.items()))
    print(f"[{label} {elapsed:6.0f}s] rss={rss_mb(broker.pid):7.1f}MB {parts}", flush=True)
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--connections", type=int, default=1000, help="connections in the loaded phase, in all")
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the loaded phase")
    parser.add_argument("--baseline-s", type=float, default=30.0, help="length of the unloaded baseline")
    parser.add_argument("--burst-threads", type=int, default=4)
    parser.add_argument("--report-s", type=float, default=10.0)
    parser.add_argument("--bursts", nargs="*", help="burst kinds to send (default: all)")
    parser.add_argument("--holders", nargs="*", help="kinds of held connections: loris, parked, unread")
    parser.add_argument(
        "--pin",
        action="store_true",
        help="run the broker and the well-behaved clients on CPU 0 and the hostile clients on the other CPUs, as if "
        "the hostile clients ran on other machines (the hostile load generator then takes no CPU from the broker)",
    )
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if args.pin and len(cpus) < 2:
        parser.error("--pin needs at least two CPUs")
    broker_cpus, hostile_cpus = ({cpus[0]}, set(cpus[1:])) if args.pin else (None, None)

    print("load average at the start: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()), flush=True)
    with BrokerProcess() as broker:
        with Wire(broker.port) as wire:
            wire.create_topic(TOPIC, PARTITIONS)
            wire.create_topic(BIG_TOPIC, 1)
            wire.create_topic(WIDE_TOPIC, 200)
            for _ in range(4):
                assert wire.produce(BIG_TOPIC, 0, batch_of(800_000, records=8)) == 0
        if broker_cpus:
            pin(broker.pid, broker_cpus)
            os.sched_setaffinity(0, broker_cpus)
        latencies = Latencies()
        clients = WellBehaved(broker.port, latencies)
        clients.start()
        baseline: dict[str, list[float]] = defaultdict(list)
        started = time.monotonic()
        while time.monotonic() - started < args.baseline_s:
            time.sleep(min(args.report_s, args.baseline_s))
            for kind, values in report("baseline", latencies, broker, time.monotonic() - started).items():
                baseline[kind] += values

        spawn = multiprocessing.get_context("spawn")
        stop, results = spawn.Event(), spawn.Queue()
        hostile = spawn.Process(
            target=run_hostile,
            args=(
                broker.port,
                max(0, args.connections - 2 * PARTITIONS - args.burst_threads),
                args.burst_threads,
                (args.holders, args.bursts),
                hostile_cpus,
                stop,
                results,
            ),
        )
        hostile.start()
        loaded: dict[str, list[float]] = defaultdict(list)
        rss: list[float] = []
        started = time.monotonic()
        while time.monotonic() - started < args.minutes * 60:
            time.sleep(args.report_s)
            for kind, values in report("loaded", latencies, broker, time.monotonic() - started).items():
                loaded[kind] += values
            rss.append(rss_mb(broker.pid))
        stop.set()
        opened, sent = results.get(timeout=300)
        hostile.join(timeout=60)
        clients.join()
        with Wire(broker.port) as wire:
            wire.metadata([TOPIC])  # still serving
        print(f"\nconnections={args.connections} minutes={args.minutes} holders opened={opened}")
        print(f"bursts sent: {sent}")
        for kind in sorted(baseline):
            base, load = p99(baseline[kind]), p99(loaded[kind])
            print(
                f"{kind}: baseline p99={base * 1000:.1f}ms (n={len(baseline[kind])}) "
                f"loaded p99={load * 1000:.1f}ms (n={len(loaded[kind])}) ratio={load / base:.2f}"
            )
        if rss:
            print(f"rss loaded: first={rss[0]:.1f}MB max={max(rss):.1f}MB last={rss[-1]:.1f}MB")
        print("load average at the end: {:.2f} {:.2f} {:.2f}".format(*os.getloadavg()))
        print(f"acknowledged={sum(clients.acked)} consumed={sum(clients.consumed)} produce errors={clients.errors}")
        lost = sum(clients.acked) - sum(clients.consumed)
        print("nothing acknowledged lost" if lost <= 0 else f"LOST {lost} acknowledged records")
        return 0 if lost <= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
