"""Transaction benchmark against an oncelog broker, with confluent-kafka (librdkafka) producers.

P3  Throughput cost of transactions: the same records (``--records`` x 100 B, one partition, linger.ms=5,
    acks=all) sent by an idempotent producer and by a transactional producer that commits every 100 ms;
    reports both records/s (median of ``--rounds`` alternating runs, after an untimed warm-up) and their
    ratio (goal >= 0.98).
P4  One-record transactions (linger.ms=0): latency of ``commit_transaction()`` over ``--commits`` commits by
    one producer (p50 / p99, goals <= 2 ms / <= 10 ms), and commits/s of ``--procs`` producers running in
    parallel processes for ``--seconds``, each on its own partition (goal >= 3,000/s).

The broker is started as a subprocess (tests.support.broker.BrokerProcess) on a free 127.0.0.1 port with a
temporary data dir and stopped at the end. The same run against librdkafka's in-process mock cluster
(``--peers``, default ``oncelog,mock``) shows what the client itself achieves; goals apply to oncelog.

Usage: python bench/txn_bench.py [--quick] [--json PATH] [--peers oncelog,mock] [--records N] [--commits N]
                                 [--procs N] [--seconds S] [--set k=v ...]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.produce_bench import prime
from tests.support.broker import BrokerProcess
from tests.support.mock_cluster import MockCluster

RECORD_SIZE = 100
P3_TOPIC = "txn-bench-p3"
P4_TOPIC = "txn-bench-p4"
COMMIT_INTERVAL_S = 0.100
DEADLINE_S = 600.0
BASE_CONF = {
    "acks": "all",
    "queue.buffering.max.messages": 1_000_000,
}
GOALS: dict[str, float] = {"p3_ratio": 0.98, "p4_p50_ms": 2.0, "p4_p99_ms": 10.0, "p4_commits_per_s": 3000.0}


@dataclass
class Results:
    peer: str
    records: int
    idempotent_records_per_s: float
    transactional_records_per_s: float
    transactional_commits: int
    p3_ratio: float
    commits: int
    p4_p50_ms: float
    p4_p99_ms: float
    p4_max_ms: float
    procs: int
    p4_parallel_commits: int
    p4_parallel_seconds: float
    p4_commits_per_s: float
    broker_cpu_s: float | None = None


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)], operation_timeout=10)[name].result(timeout=20)


def _on_delivery(errors: list[str]):
    def cb(err: object, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    return cb


def _produce(producer: Producer, payload: bytes, cb: object) -> None:
    while True:
        try:
            producer.produce(P3_TOPIC, payload, partition=0, on_delivery=cb)
            return
        except BufferError:
            producer.poll(0.01)


def run_idempotent(bootstrap: str, n: int) -> float:
    """Seconds to send ``n`` records with an idempotent producer, first send to last ack."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5, **BASE_CONF})
    producer.list_topics(P3_TOPIC, timeout=10)
    prime(producer, P3_TOPIC)  # the producer id, as init_transactions() gets it for the transactional run
    payload = bytes(range(RECORD_SIZE))
    errors: list[str] = []
    cb = _on_delivery(errors)
    start = time.perf_counter()
    for _ in range(n):
        _produce(producer, payload, cb)
        producer.poll(0)
    left = producer.flush(DEADLINE_S)
    elapsed = time.perf_counter() - start
    if left or errors:
        raise RuntimeError(f"idempotent run: {left} undelivered, errors {errors[:3]}")
    return elapsed


@dataclass(frozen=True)
class TransactionalRun:
    """One P3 transactional run: its wall time, and per commit how long the producer stopped sending for it."""

    seconds: float
    #: Per commit: ``flush()``, until the transaction's last records are acknowledged.
    flush_s: tuple[float, ...]
    #: Per commit: ``commit_transaction()`` after that flush (the EndTxn round trip).
    end_s: tuple[float, ...]

    @property
    def commits(self) -> int:
        return len(self.end_s)

    @property
    def pauses_s(self) -> tuple[float, ...]:
        """Per commit: how long the producer stopped sending for it (flush + EndTxn)."""
        return tuple(f + e for f, e in zip(self.flush_s, self.end_s, strict=True))

    @property
    def paused_s(self) -> float:
        """Wall time spent committing, not sending."""
        return sum(self.flush_s) + sum(self.end_s)

    @property
    def sending_s(self) -> float:
        return self.seconds - self.paused_s


def run_transactional(bootstrap: str, n: int) -> TransactionalRun:
    """Send ``n`` records in transactions committed every COMMIT_INTERVAL_S, first send to last commit.

    Each commit is ``flush()`` then ``commit_transaction()``: what ``commit_transaction()`` does alone (it flushes
    first), timed in its two parts."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"txn-bench-p3-{uuid.uuid4()}",
            "linger.ms": 5,
            **BASE_CONF,
        }
    )
    producer.init_transactions(30)
    producer.list_topics(P3_TOPIC, timeout=10)
    payload = bytes(range(RECORD_SIZE))
    errors: list[str] = []
    cb = _on_delivery(errors)
    flush_s: list[float] = []
    end_s: list[float] = []

    def commit() -> None:
        t0 = time.perf_counter()
        left = producer.flush(DEADLINE_S)
        t1 = time.perf_counter()
        if left:
            raise RuntimeError(f"transactional run: {left} undelivered after {DEADLINE_S} s")
        producer.commit_transaction(DEADLINE_S)
        flush_s.append(t1 - t0)
        end_s.append(time.perf_counter() - t1)

    start = time.perf_counter()
    producer.begin_transaction()
    txn_start = start
    for _ in range(n):
        _produce(producer, payload, cb)
        producer.poll(0)
        if time.perf_counter() - txn_start >= COMMIT_INTERVAL_S:
            commit()
            producer.begin_transaction()
            txn_start = time.perf_counter()
    commit()
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"transactional run: errors {errors[:3]}")
    return TransactionalRun(elapsed, tuple(flush_s), tuple(end_s))


def one_record_txn_producer(bootstrap: str, name: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": name, "linger.ms": 0, **BASE_CONF})
    producer.init_transactions(30)
    producer.list_topics(P4_TOPIC, timeout=10)
    return producer


def one_record_txn(producer: Producer, partition: int, payload: bytes) -> float:
    """Begin, produce one record, commit; return the seconds commit_transaction() took."""
    producer.begin_transaction()
    producer.produce(P4_TOPIC, payload, partition=partition)
    t0 = time.perf_counter()
    producer.commit_transaction(30)
    return time.perf_counter() - t0


def commit_latencies(bootstrap: str, commits: int) -> list[float]:
    producer = one_record_txn_producer(bootstrap, f"txn-bench-p4-lat-{uuid.uuid4()}")
    payload = bytes(range(RECORD_SIZE))
    for _ in range(min(50, commits)):  # warm-up
        one_record_txn(producer, 0, payload)
    return [one_record_txn(producer, 0, payload) for _ in range(commits)]


def _parallel_worker(bootstrap: str, partition: int, seconds: float, ready: object, go: object, out: object) -> None:
    """One process: warm up, wait for the common start, then commit one-record transactions for ``seconds``."""
    producer = one_record_txn_producer(bootstrap, f"txn-bench-p4-par-{partition}-{uuid.uuid4()}")
    payload = bytes(range(RECORD_SIZE))
    for _ in range(20):
        one_record_txn(producer, partition, payload)
    ready.release()  # type: ignore[attr-defined]
    go.wait()  # type: ignore[attr-defined]
    start = time.perf_counter()
    cpu_start = time.process_time()  # every thread of the process: librdkafka's too
    count = 0
    while time.perf_counter() - start < seconds:
        one_record_txn(producer, partition, payload)
        count += 1
    out.put((count, time.perf_counter() - start, time.process_time() - cpu_start))  # type: ignore[attr-defined]


def parallel_commits(
    bootstrap: str, procs: int, seconds: float, *, on_go: Callable[[], object] | None = None
) -> tuple[int, float, float]:
    """Total commits, the longest worker's duration and the workers' CPU seconds (all their threads, while
    committing) for ``procs`` processes in parallel; ``on_go`` is called once every worker is ready, just before
    they start committing."""
    ctx = mp.get_context("spawn")
    ready, go, out = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    workers = [ctx.Process(target=_parallel_worker, args=(bootstrap, p, seconds, ready, go, out)) for p in range(procs)]
    for w in workers:
        w.start()
    for _ in workers:
        if not ready.acquire(timeout=120):
            raise RuntimeError("a parallel worker did not get ready")
    if on_go is not None:
        on_go()
    go.set()
    results = [out.get(timeout=seconds + 120) for _ in workers]
    for w in workers:
        w.join(30)
    return sum(c for c, _, _ in results), max(s for _, s, _ in results), sum(cpu for _, _, cpu in results)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, round(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def measure(bootstrap: str, args: argparse.Namespace, peer: str) -> Results:
    """Run P3 and P4 against ``bootstrap`` (topics must exist)."""
    warm = min(max(args.records // 10, 1), 100_000)
    run_idempotent(bootstrap, warm)
    run_transactional(bootstrap, warm)
    idem_runs, txn_runs = [], []
    for _ in range(args.rounds):  # alternate, so drift (page cache, disk) hits both alike; keep the medians
        idem_runs.append(run_idempotent(bootstrap, args.records))
        txn_runs.append(run_transactional(bootstrap, args.records))
    idem_s = statistics.median(idem_runs)
    txn_s = statistics.median(t.seconds for t in txn_runs)
    txn_commits = txn_runs[0].commits
    lat = commit_latencies(bootstrap, args.commits)
    par_commits, par_s, _ = parallel_commits(bootstrap, args.procs, args.seconds)
    idem_rate, txn_rate = args.records / idem_s, args.records / txn_s
    return Results(
        peer=peer,
        records=args.records,
        idempotent_records_per_s=idem_rate,
        transactional_records_per_s=txn_rate,
        transactional_commits=txn_commits,
        p3_ratio=txn_rate / idem_rate,
        commits=args.commits,
        p4_p50_ms=statistics.median(lat) * 1000,
        p4_p99_ms=percentile(lat, 99) * 1000,
        p4_max_ms=max(lat) * 1000,
        procs=args.procs,
        p4_parallel_commits=par_commits,
        p4_parallel_seconds=par_s,
        p4_commits_per_s=par_commits / par_s,
    )


def bench_oncelog(args: argparse.Namespace, settings: dict[str, str]) -> Results:
    with BrokerProcess(settings=settings) as broker:
        create_topic(broker.bootstrap, P3_TOPIC, 1)
        create_topic(broker.bootstrap, P4_TOPIC, max(args.procs, 1))
        cpu0 = broker.cpu_seconds()
        result = measure(broker.bootstrap, args, "oncelog")
        result.broker_cpu_s = broker.cpu_seconds() - cpu0
    return result


def bench_mock(args: argparse.Namespace) -> Results:
    """The same run against librdkafka's in-process mock cluster: what the client achieves with a broker
    that does no I/O (a reference for the client-side share of each number)."""
    with MockCluster(1) as mock:
        mock.create_topic(P3_TOPIC, 1)
        mock.create_topic(P4_TOPIC, max(args.procs, 1))
        return measure(mock.bootstrap, args, "mock")


def print_table(results: list[Results]) -> None:
    def fmt(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    first = results[0]
    rows: list[tuple[str, str, str, str]] = [
        ("P3 idempotent rec/s", "idempotent_records_per_s", ",.0f", ""),
        ("P3 transactional rec/s", "transactional_records_per_s", ",.0f", ""),
        ("P3 commits in the transactional run", "transactional_commits", "d", ""),
        ("P3 ratio txn/idempotent", "p3_ratio", ".3f", ">= 0.98"),
        (f"P4 commit p50 ms ({first.commits} commits)", "p4_p50_ms", ".2f", "<= 2"),
        ("P4 commit p99 ms", "p4_p99_ms", ".2f", "<= 10"),
        ("P4 commit max ms", "p4_max_ms", ".2f", ""),
        (f"P4 commits/s ({first.procs} procs)", "p4_commits_per_s", ",.0f", ">= 3,000"),
        ("broker CPU s (whole run)", "broker_cpu_s", ".1f", ""),
    ]
    print(
        f"records={first.records} x {RECORD_SIZE}B, acks=all; P3: 1 partition, linger.ms=5, commit every "
        f"{COMMIT_INTERVAL_S * 1000:.0f} ms; P4: linger.ms=0, {first.procs} processes"
    )
    print(f"{'metric':<40}" + "".join(f"{r.peer:>12}" for r in results) + f"{'goal':>10}{'met':>6}")
    for name, attr, spec, goal in rows:
        line = f"{name:<40}" + "".join(f"{fmt(getattr(r, attr), spec):>12}" for r in results) + f"{goal:>10}"
        met = verdict(attr, next((r for r in results if r.peer == "oncelog"), None))
        print(line + f"{met:>6}")


def verdict(attr: str, r: Results | None) -> str:
    """Whether oncelog's value of ``attr`` meets GOALS ("ok" / "MISS"); empty where there is no goal."""
    if r is None or attr not in GOALS:
        return ""
    value, goal = getattr(r, attr), GOALS[attr]
    met = value >= goal if attr in ("p3_ratio", "p4_commits_per_s") else value <= goal
    return "ok" if met else "MISS"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="oncelog transaction benchmark (P3, P4)")
    parser.add_argument("--quick", action="store_true", help="small run: 200k records, 100 commits, 2 s parallel")
    parser.add_argument("--records", type=int, help="P3 record count (default 500000; quick 200000)")
    parser.add_argument("--commits", type=int, help="P4 single-producer commits (default 500; quick 100)")
    parser.add_argument("--rounds", type=int, default=3, help="P3 alternating rounds; medians are reported")
    parser.add_argument("--procs", type=int, default=8, help="P4 parallel producer processes")
    parser.add_argument("--seconds", type=float, help="P4 parallel run length (default 5; quick 2)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--peers", default="oncelog,mock", help="comma list of oncelog, mock (reference)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="broker setting")
    args = parser.parse_args(argv)
    args.records = args.records or (200_000 if args.quick else 500_000)
    args.commits = args.commits or (100 if args.quick else 500)
    args.seconds = args.seconds or (2.0 if args.quick else 5.0)
    settings = dict(s.split("=", 1) for s in args.set)

    results = []
    for peer in [p.strip() for p in args.peers.split(",") if p.strip()]:
        if peer == "oncelog":
            results.append(bench_oncelog(args, settings))
        elif peer == "mock":
            results.append(bench_mock(args))
        else:
            parser.error(f"unknown peer {peer!r}")
    print_table(results)
    if args.json:
        doc = {"results": {r.peer: asdict(r) for r in results}, "goals": GOALS}
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
