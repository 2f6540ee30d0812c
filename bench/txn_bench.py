"""Transaction benchmark against an oncelog broker, with confluent-kafka (librdkafka) producers.

P3  Throughput cost of transactions: the same records (``--records`` x 100 B, one partition, linger.ms=5,
    acks=all) sent by an idempotent producer and by a transactional producer that commits every 100 ms;
    reports both records/s and their ratio (goal >= 0.98). Each run is preceded by an untimed warm-up.
P4  One-record transactions (linger.ms=0): latency of ``commit_transaction()`` over ``--commits`` commits by
    one producer (p50 / p99, goals <= 2 ms / <= 10 ms), and commits/s of ``--procs`` producers running in
    parallel processes for ``--seconds``, each on its own partition (goal >= 3,000/s).

The broker is started as a subprocess (tests.support.broker.BrokerProcess) on a free 127.0.0.1 port with a
temporary data dir and stopped at the end.

Usage: python bench/txn_bench.py [--quick] [--json PATH] [--records N] [--commits N] [--procs N]
                                 [--seconds S] [--set k=v ...]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.broker import BrokerProcess

RECORD_SIZE = 100
P3_TOPIC = "txn-bench-p3"
P4_TOPIC = "txn-bench-p4"
COMMIT_INTERVAL_S = 0.100
DEADLINE_S = 600.0
BASE_CONF = {
    "acks": "all",
    "queue.buffering.max.messages": 1_000_000,
}
GOALS = {"p3_ratio": 0.98, "p4_p50_ms": 2.0, "p4_p99_ms": 10.0, "p4_commits_per_s": 3000.0}


@dataclass
class Results:
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
    broker_cpu_s: float


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


def run_transactional(bootstrap: str, n: int) -> tuple[float, int]:
    """Seconds to send ``n`` records in transactions committed every COMMIT_INTERVAL_S; and the commit count."""
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
    commits = 0
    start = time.perf_counter()
    producer.begin_transaction()
    txn_start = start
    for _ in range(n):
        _produce(producer, payload, cb)
        producer.poll(0)
        now = time.perf_counter()
        if now - txn_start >= COMMIT_INTERVAL_S:
            producer.commit_transaction(DEADLINE_S)
            commits += 1
            producer.begin_transaction()
            txn_start = time.perf_counter()
    producer.commit_transaction(DEADLINE_S)
    commits += 1
    elapsed = time.perf_counter() - start
    if errors:
        raise RuntimeError(f"transactional run: errors {errors[:3]}")
    return elapsed, commits


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
    count = 0
    while time.perf_counter() - start < seconds:
        one_record_txn(producer, partition, payload)
        count += 1
    out.put((count, time.perf_counter() - start))  # type: ignore[attr-defined]


def parallel_commits(bootstrap: str, procs: int, seconds: float) -> tuple[int, float]:
    """Total commits and the longest worker's duration for ``procs`` processes in parallel."""
    ctx = mp.get_context("spawn")
    ready, go, out = ctx.Semaphore(0), ctx.Event(), ctx.Queue()
    workers = [ctx.Process(target=_parallel_worker, args=(bootstrap, p, seconds, ready, go, out)) for p in range(procs)]
    for w in workers:
        w.start()
    for _ in workers:
        if not ready.acquire(timeout=120):
            raise RuntimeError("a parallel worker did not get ready")
    go.set()
    results = [out.get(timeout=seconds + 120) for _ in workers]
    for w in workers:
        w.join(30)
    return sum(c for c, _ in results), max(s for _, s in results)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, round(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def run(args: argparse.Namespace, settings: dict[str, str]) -> Results:
    with BrokerProcess(settings=settings) as broker:
        bs = broker.bootstrap
        create_topic(bs, P3_TOPIC, 1)
        create_topic(bs, P4_TOPIC, max(args.procs, 1))
        cpu0 = broker.cpu_seconds()

        warm = min(max(args.records // 10, 1), 100_000)
        run_idempotent(bs, warm)
        run_transactional(bs, warm)
        idem_s = run_idempotent(bs, args.records)
        txn_s, txn_commits = run_transactional(bs, args.records)

        lat = commit_latencies(bs, args.commits)
        par_commits, par_s = parallel_commits(bs, args.procs, args.seconds)
        cpu = broker.cpu_seconds() - cpu0

    idem_rate, txn_rate = args.records / idem_s, args.records / txn_s
    return Results(
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
        broker_cpu_s=cpu,
    )


def print_table(r: Results) -> None:
    def ok(met: bool) -> str:
        return "ok" if met else "MISS"

    rows = [
        ("P3 idempotent rec/s", f"{r.idempotent_records_per_s:,.0f}", "", ""),
        (
            f"P3 transactional rec/s ({r.transactional_commits} commits)",
            f"{r.transactional_records_per_s:,.0f}",
            "",
            "",
        ),
        ("P3 ratio txn/idempotent", f"{r.p3_ratio:.3f}", ">= 0.98", ok(r.p3_ratio >= GOALS["p3_ratio"])),
        (f"P4 commit p50 ms ({r.commits} commits)", f"{r.p4_p50_ms:.2f}", "<= 2", ok(r.p4_p50_ms <= 2.0)),
        ("P4 commit p99 ms", f"{r.p4_p99_ms:.2f}", "<= 10", ok(r.p4_p99_ms <= 10.0)),
        ("P4 commit max ms", f"{r.p4_max_ms:.2f}", "", ""),
        (
            f"P4 commits/s ({r.procs} procs, {r.p4_parallel_seconds:.1f}s)",
            f"{r.p4_commits_per_s:,.0f}",
            ">= 3,000",
            ok(r.p4_commits_per_s >= GOALS["p4_commits_per_s"]),
        ),
        ("broker CPU s (whole run)", f"{r.broker_cpu_s:.1f}", "", ""),
    ]
    print(f"records={r.records} x {RECORD_SIZE}B, acks=all, P3: 1 partition linger.ms=5, P4: linger.ms=0")
    print(f"{'metric':<44} {'value':>12} {'goal':>9} {'':>5}")
    for name, value, goal, verdict in rows:
        print(f"{name:<44} {value:>12} {goal:>9} {verdict:>5}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="oncelog transaction benchmark (P3, P4)")
    parser.add_argument("--quick", action="store_true", help="small run: 50k records, 100 commits, 2 s parallel")
    parser.add_argument("--records", type=int, help="P3 record count (default 500000; quick 50000)")
    parser.add_argument("--commits", type=int, help="P4 single-producer commits (default 500; quick 100)")
    parser.add_argument("--procs", type=int, default=8, help="P4 parallel producer processes")
    parser.add_argument("--seconds", type=float, help="P4 parallel run length (default 5; quick 2)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="broker setting")
    args = parser.parse_args(argv)
    args.records = args.records or (50_000 if args.quick else 500_000)
    args.commits = args.commits or (100 if args.quick else 500)
    args.seconds = args.seconds or (2.0 if args.quick else 5.0)
    settings = dict(s.split("=", 1) for s in args.set)

    results = run(args, settings)
    print_table(results)
    if args.json:
        args.json.write_text(json.dumps({"results": asdict(results), "goals": GOALS}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
