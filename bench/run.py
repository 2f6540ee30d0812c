"""oncelog's benchmark suite: P1-P7 and P9 of the issue "Benchmark suite against librdkafka's mock cluster", and
C1-C5 of the cluster (``bench/cluster_bench.py``: replication factor 3 vs 1, failover, controlled shutdown,
transaction coordinator failover, transactional replication factor 3 vs 1), P10, delayed delivery (issue 26), and
S1, the Spark pipeline (issue 27, ``bench/spark_bench.py``: batch read and exactly-once copy in local[2]), and B1,
the bundled client against aiokafka (issue 27, ``bench/client_bench.py``: produce, consume, read_committed consume).
Apache Kafka itself (issue 30: ``tests/support/kafka_peer.py``, a single-node KRaft broker from the jars
``java/pom.xml`` pins, fetched with Maven when missing) runs beside the mock in P1-P7 and P9 with the same
client in the same run and the same durability as the oncelog figure it is compared with (fsync per append:
``log.flush.interval.messages=1``; page cache: Kafka's default), and as a three-node KRaft cluster
(``tests/support/kafka_cluster.py``, every node fsyncing each append) beside oncelog's cluster in C1 and C5, after
oncelog's rounds; ``--no-kafka`` leaves it out.

Starts its own brokers (subprocesses on free 127.0.0.1 ports, temporary data dirs) and librdkafka's in-process mock
cluster, and prints one table: every figure with its goal, met/MISS, and the peer or machine limit measured in the
same run beside it. Machine limits (sequential write with and without fdatasync, fdatasync latency, loopback TCP)
are measured first when P2, P3, P4 or P5 runs.

Usage: python bench/run.py [--quick] [--only P1,P5] [--records N] [--json PATH] [--plot PNG] [--profile DIR]
                           [--no-kafka] [--kafka-bootstrap HOST:PORT]

``--quick`` (about 4 minutes on 2 cores) scales every benchmark down (P7 to 256 MiB and 2,000 producer ids) and
says so in the output. ``--records`` overrides the record count of P1, P3, P6 and P9. ``--kafka-bootstrap`` gives
P1 an Apache Kafka already running (it must fsync every append, as ``KafkaPeer(fsync=True)``) instead of starting
one: the smoke test (``tests/bench/test_bench_smoke.py``) hands it the test run's shared peer.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import (  # noqa: E402
    client_bench,
    cluster_bench,
    consume_bench,
    delay_bench,
    e2e_bench,
    log_write_bench,
    machine,
    partitions_bench,
    produce_bench,
    restart_bench,
    runtime,
    spark_bench,
    txn_bench,
)
from bench.report import Line, fmt, table, to_json  # noqa: E402
from tests.support import kafka_jars  # noqa: E402
from tests.support.broker import BrokerProcess  # noqa: E402
from tests.support.kafka_peer import KafkaPeer  # noqa: E402
from tests.support.mock_cluster import MockCluster  # noqa: E402

BENCHES = ("P1", "P2", "P3", "P4", "P5", "P6", "P7", "P9", "P10", "C1", "C2", "C3", "C4", "C5", "S1", "B1")
MIB = 1 << 20


@dataclass(frozen=True)
class Sizes:
    """How much work each benchmark does."""

    p1_records: int
    p2_bytes: int
    p3_records: int  # enough for a few dozen commits a run: with a handful, one slow commit moves the ratio
    p4_commits: int
    p4_procs: int
    p4_seconds: float
    p5_rate: int
    p5_seconds: float
    p6_records: int
    p7_bytes: int
    p7_producers: int
    p9_records: int
    rounds: int  # alternating rounds of P1, P3 and P9 (medians are reported)
    p9_partitions: int = 1000
    c1_records: int = 200_000  # per round, replication factor 1 and 3 alternating
    cluster_trials: int = 5  # C2 leader kills, C3 controlled shutdowns, C4 coordinator kills
    # per round, transactional, replication factor 1 and 3 alternating: as many as P3's, so that a round holds many
    # 100 ms transactions (a throughput) and not one commit (a latency)
    c5_records: int = 1_000_000
    p10_records: int = 200_000  # P10: records forwarded at once
    p10_rate: int = 10_000  # P10: delayed records per second offered for the lateness figure
    p10_seconds: float = 10.0
    s1_records: int = 500_000  # S1: records of 100 B read and copied through Spark (local[2])
    b1_records: int = 1_000_000  # B1: records of 100 B produced and read twice by each client


FULL = Sizes(1_000_000, 2048 * MIB, 2_000_000, 500, 8, 5.0, 10_000, 20.0, 1_000_000, 1024 * MIB, 10_000, 1_000_000, 3)
QUICK = Sizes(
    300_000,
    512 * MIB,
    1_000_000,
    200,
    8,
    3.0,
    10_000,
    8.0,
    300_000,
    256 * MIB,
    2_000,
    200_000,
    3,
    c1_records=50_000,
    cluster_trials=3,
    c5_records=300_000,
    s1_records=200_000,
    b1_records=300_000,
)


@dataclass
class Run:
    sizes: Sizes
    lines: list[Line] = field(default_factory=list)
    samples: dict[str, dict[str, list[float]]] = field(default_factory=dict)  # panel -> peer -> ms
    details: dict[str, object] = field(default_factory=dict)
    disk: machine.DiskFigures | None = None
    loopback_mb_s: float | None = None
    runtime: runtime.RuntimeFigures | None = None
    kafka: bool = True  # Apache Kafka beside the mock in P1-P7 and P9 (issue 30), its cluster beside C1 and C5
    kafka_bootstrap: str | None = None  # P1's Kafka, already running (fsync per append); else P1 starts one

    def add_details(self, bench: str, **more: object) -> dict[str, object]:
        """Add ``more`` (a peer's figures, e.g. Kafka's) to the details the oncelog part of ``bench`` recorded."""
        details = self.details[bench]
        assert isinstance(details, dict)
        details.update(more)
        return details

    def add(self, *lines: Line) -> None:
        self.lines.extend(lines)
        for ln in lines:
            verdict = "" if ln.met is None else (" met" if ln.met else " MISS")
            print(f"  {ln.bench} {ln.label}: {fmt(ln.value, ln.spec)} {ln.goal}{verdict}  {ln.beside}", flush=True)


# ---- the benchmarks -------------------------------------------------------------------------------------------


def bench_machine(r: Run) -> None:
    size = r.sizes.p2_bytes
    with tempfile.TemporaryDirectory(prefix="oncelog-machine-") as d:
        r.disk = disk = machine.disk(Path(d), size)
    r.loopback_mb_s = machine.loopback_mb_s(max(size, 1024 * MIB))
    r.runtime = rt = runtime.measure()
    r.details["machine"] = {**asdict(disk), "loopback_mb_s": r.loopback_mb_s, **asdict(rt)}
    r.add(
        Line("machine", f"seq write, page cache, fresh pages ({size // MIB} MiB)", disk.fresh_pagecache_mb_s, ",.0f"),
        Line("machine", "seq write, page cache, reused pages", disk.pagecache_mb_s, ",.0f"),
        Line("machine", "seq write + one fdatasync at the end (dd)", disk.fdatasync_end_mb_s, ",.0f"),
        Line("machine", "seq write + fdatasync every 1 MiB", disk.fdatasync_each_mb_s, ",.0f"),
        Line("machine", "4 KiB append + fdatasync p50 ms", disk.fdatasync_p50_ms, ".3f"),
        Line("machine", "4 KiB append + fdatasync p99 ms", disk.fdatasync_p99_ms, ".3f"),
        Line("machine", "4 KiB append + fdatasync: kernel CPU us", disk.fdatasync_cpu_us, ".0f"),
        Line("machine", "loopback TCP MB/s (one socket, 1 MiB sends)", r.loopback_mb_s, ",.0f"),
        Line(
            "machine",
            "trio echo server: round trip p50 us",
            rt.echo_rtt_p50_us,
            ".0f",
            f"server CPU per request {rt.echo_server_cpu_us:.0f} us; {rt.echo_server_cpu_concurrent_us:.0f} us with "
            f"{runtime.CONCURRENCY} connections busy",
        ),
        Line(
            "machine",
            "fsync-helper hand-off (no-op) p50 us",
            rt.handoff_p50_us,
            ".0f",
            f"CPU per job {rt.handoff_cpu_us:.0f} us; {rt.handoff_cpu_concurrent_us:.0f} us with "
            f"{runtime.CONCURRENCY} outstanding",
        ),
    )


def bench_p1(r: Run) -> None:
    """Every peer up at once; after a warm-up, alternating rounds (so drift hits all alike); medians. Kafka fsyncs
    every append, as oncelog does by default."""
    n, rounds = r.sizes.p1_records, r.sizes.rounds
    with contextlib.ExitStack() as peers:
        broker = peers.enter_context(BrokerProcess())
        mock = peers.enter_context(MockCluster(1))
        kafka = r.kafka_bootstrap
        if kafka is None and r.kafka:
            kafka = peers.enter_context(KafkaPeer(fsync=True)).bootstrap
        txn_bench.create_topic(broker.bootstrap, produce_bench.TOPIC, 1)
        mock.create_topic(produce_bench.TOPIC, 1)
        others = [mock.bootstrap]
        if kafka is not None:
            txn_bench.create_topic(kafka, produce_bench.TOPIC, 1)
            others.append(kafka)
        for peer in (broker.bootstrap, *others):
            produce_bench.produce(peer, produce_bench.warmup_records(n))
        one_s, mock_s, kafka_s, cpu = [], [], [], []
        for _ in range(rounds):
            cpu0 = broker.cpu_seconds()
            one_s.append(produce_bench.produce(broker.bootstrap, n))
            cpu.append(broker.cpu_seconds() - cpu0)
            mock_s.append(produce_bench.produce(mock.bootstrap, n))
            if kafka is not None:
                kafka_s.append(produce_bench.produce(kafka, n))
    one_rate, mock_rate = n / statistics.median(one_s), n / statistics.median(mock_s)
    cpu_per_m = statistics.median(cpu) * 1_000_000 / n
    r.details["P1"] = {
        "records": n,
        "rounds": rounds,
        "oncelog_s": one_s,
        "mock_s": mock_s,
        "kafka_s": kafka_s,
        "broker_cpu_s": cpu,
    }
    beside = f"oncelog {one_rate:,.0f} rec/s, mock {mock_rate:,.0f} rec/s ({n:,} x 100 B, median of {rounds})"
    r.add(
        Line("P1", "produce rec/s oncelog / mock", one_rate / mock_rate, ".3f", beside, "P1_produce_ratio_vs_mock"),
        Line(
            "P1",
            "broker CPU s per 1M records",
            cpu_per_m,
            ".2f",
            f"{statistics.median(one_s):.2f} s wall for {n:,}",
            "P1_broker_cpu_s_per_million",
        ),
    )
    if kafka_s:
        kafka_rate = n / statistics.median(kafka_s)
        r.add(
            Line(
                "P1",
                "produce rec/s oncelog / Kafka (fsync/append)",
                one_rate / kafka_rate,
                ".3f",
                f"Kafka {kafka_jars.kafka_version()} {kafka_rate:,.0f} rec/s",
                "P1_produce_ratio_vs_kafka",
            )
        )


def bench_p2(r: Run) -> None:
    size = r.sizes.p2_bytes
    page = log_write_bench.run("pagecache", size)
    fsync = log_write_bench.run("fsync", size)
    kafka = {mode: log_write_bench.run_kafka(mode, size) for mode in ("pagecache", "fsync")} if r.kafka else {}
    r.details["P2"] = {"pagecache": asdict(page), "fsync": asdict(fsync)}
    r.details["P2"].update({f"kafka_{mode}": asdict(result) for mode, result in kafka.items()})
    d, lo = r.disk, r.loopback_mb_s
    lim = "" if d is None or lo is None else f"; loopback {lo:,.0f} MB/s"
    r.add(
        Line(
            "P2",
            "MB/s into the log, page-cache mode",
            page.mb_s,
            ",.0f",
            (f"disk page-cache write {d.fresh_pagecache_mb_s:,.0f} (fresh) / {d.pagecache_mb_s:,.0f} MB/s" if d else "")
            + lim
            + f"; broker CPU {page.broker_cpu_s:.1f} s",
            "P2_mb_s_pagecache",
        ),
        Line(
            "P2",
            "MB/s into the log, fsync before ack",
            fsync.mb_s,
            ",.0f",
            (
                f"disk write+fdatasync {d.fdatasync_end_mb_s:,.0f} (end) / {d.fdatasync_each_mb_s:,.0f} "
                "(every MiB) MB/s"
                if d
                else ""
            )
            + f"; broker CPU {fsync.broker_cpu_s:.1f} s",
            "P2_mb_s_fsync",
        ),
    )
    for mode, label in (("pagecache", "page-cache mode"), ("fsync", "fsync/append")):
        if mode in kafka:
            ours = page if mode == "pagecache" else fsync
            r.add(
                Line(
                    "P2",
                    f"Kafka MB/s into the log, {label}",
                    kafka[mode].mb_s,
                    ",.0f",
                    f"oncelog / Kafka {ours.mb_s / kafka[mode].mb_s:.3f}; Kafka CPU {kafka[mode].broker_cpu_s:.1f} s",
                    f"P2_kafka_mb_s_{mode}",
                )
            )


@dataclass(frozen=True)
class P3Result:
    """P3 on one peer: the median idempotent run and the median transactional run (by wall time).

    The ratio splits exactly into the producer's own pace while sending and the time it stops for commits:
    ``ratio = sending_factor * (1 - paused_share)``."""

    records: int
    idempotent_s: float
    transactional: txn_bench.TransactionalRun

    @property
    def ratio(self) -> float:
        return self.idempotent_s / self.transactional.seconds

    @property
    def sending_factor(self) -> float:
        """Records/s while the transactional producer sends, over the idempotent run's records/s."""
        return self.idempotent_s / self.transactional.sending_s

    @property
    def paused_share(self) -> float:
        """Share of the transactional run spent committing (flush, then EndTxn)."""
        return self.transactional.paused_s / self.transactional.seconds

    def pause_p50_ms(self) -> tuple[float, float]:
        """Per commit, medians of (flush, EndTxn) in ms."""
        t = self.transactional
        return statistics.median(t.flush_s) * 1000, statistics.median(t.end_s) * 1000

    @property
    def commit_pause_p50_ms(self) -> float:
        """Median of the producer's whole stop per commit (flush + EndTxn), in ms."""
        return statistics.median(self.transactional.pauses_s) * 1000

    def summary(self) -> dict[str, object]:
        flush_ms, end_ms = self.pause_p50_ms()
        return {
            "idempotent_records_per_s": self.records / self.idempotent_s,
            "transactional_records_per_s": self.records / self.transactional.seconds,
            "commits": self.transactional.commits,
            "ratio": self.ratio,
            "sending_factor": self.sending_factor,
            "paused_share": self.paused_share,
            "flush_p50_ms": flush_ms,
            "end_txn_p50_ms": end_ms,
            "commit_pause_p50_ms": self.commit_pause_p50_ms,
        }


def _p3(bootstrap: str, n: int, rounds: int) -> P3Result:
    """Alternating idempotent and transactional rounds after a warm-up; the median run of each."""
    warm = min(max(n // 10, 1), 100_000)
    txn_bench.run_idempotent(bootstrap, warm)
    txn_bench.run_transactional(bootstrap, warm)
    idem, txn = [], []
    for _ in range(rounds):
        idem.append(txn_bench.run_idempotent(bootstrap, n))
        txn.append(txn_bench.run_transactional(bootstrap, n))
    median_txn = sorted(txn, key=lambda t: t.seconds)[len(txn) // 2]
    return P3Result(n, statistics.median(idem), median_txn)


def bench_p3(r: Run) -> None:
    n, rounds = r.sizes.p3_records, r.sizes.rounds
    with BrokerProcess() as broker:
        txn_bench.create_topic(broker.bootstrap, txn_bench.P3_TOPIC, 1)
        ours = _p3(broker.bootstrap, n, rounds)
    with MockCluster(1) as mock:
        mock.create_topic(txn_bench.P3_TOPIC, 1)
        peer = _p3(mock.bootstrap, n, rounds)
    kafka = None
    if r.kafka:
        with KafkaPeer(fsync=True) as kafka_peer:
            txn_bench.create_topic(kafka_peer.bootstrap, txn_bench.P3_TOPIC, 1)
            kafka = _p3(kafka_peer.bootstrap, n, rounds)
    ceiling = p3_ceiling(r, peer.commit_pause_p50_ms)
    r.details["P3"] = {
        "oncelog": ours.summary(),
        "mock": peer.summary(),
        "kafka": kafka.summary() if kafka else None,
        **({"ceiling": ceiling} if ceiling is not None else {}),
    }
    ceiling_text = (
        ""
        if ceiling is None
        else f"; durable ceiling {ceiling:.3f} = 1 / (1 + (mock's pause {peer.commit_pause_p50_ms:.2f} ms + "
        f"{FSYNCS_IN_COMMIT_PAUSE} serial fsyncs {FSYNCS_IN_COMMIT_PAUSE * _per_fsync_ms(r):.2f} ms) / "
        f"{txn_bench.COMMIT_INTERVAL_S * 1000:.0f} ms)"
    )
    flush_ms, end_ms = ours.pause_p50_ms()
    peer_flush_ms, peer_end_ms = peer.pause_p50_ms()
    r.add(
        Line(
            "P3",
            "txn (commit / 100 ms) / idempotent rec/s",
            ours.ratio,
            ".3f",
            f"oncelog {n / ours.transactional.seconds:,.0f} vs {n / ours.idempotent_s:,.0f} rec/s; "
            f"mock ratio {peer.ratio:.3f}{ceiling_text}",
            "P3_txn_vs_idempotent",
        ),
        Line(
            "P3",
            "sending pace in transactions / idempotent",
            ours.sending_factor,
            ".3f",
            f"mock {peer.sending_factor:.3f}; ratio = pace x (1 - paused share)",
        ),
        Line(
            "P3",
            "share of the txn run paused for commits",
            ours.paused_share,
            ".3f",
            f"mock {peer.paused_share:.3f}; per commit p50: flush {flush_ms:.2f} + EndTxn {end_ms:.2f} ms "
            f"(mock {peer_flush_ms:.2f} + {peer_end_ms:.2f})",
        ),
    )
    if kafka is not None:
        kafka_flush_ms, kafka_end_ms = kafka.pause_p50_ms()
        r.add(
            Line(
                "P3",
                "Kafka (fsync/append): txn / idempotent rec/s",
                kafka.ratio,
                ".3f",
                f"Kafka {n / kafka.transactional.seconds:,.0f} vs {n / kafka.idempotent_s:,.0f} rec/s; paused share "
                f"{kafka.paused_share:.3f}; per commit p50: flush {kafka_flush_ms:.2f} + EndTxn {kafka_end_ms:.2f} ms",
                "P3_kafka_txn_vs_idempotent",
            )
        )


def _per_fsync_ms(r: Run) -> float:
    """One fsync a commit waits for: the machine's fdatasync p50 plus the hand-off to the fsync helper."""
    assert r.disk is not None and r.runtime is not None
    return r.disk.fdatasync_p50_ms + r.runtime.handoff_p50_us / 1000


def p3_ceiling(r: Run, client_pause_ms: float) -> float | None:
    """The best P3 ratio a broker that fsyncs before acknowledging can reach on this machine with this client, were
    it to cost nothing itself (None without the machine figures).

    Every ``COMMIT_INTERVAL_S`` of sending, the transactional producer stops for the commit: for its own pause
    (``client_pause_ms``: the mock's median, a broker that does no I/O) plus the fsyncs that stop waits for one
    after another (``FSYNCS_IN_COMMIT_PAUSE``). Its sending pace is taken to equal the idempotent producer's, which
    the mock shows it often does not: the real ceiling is lower."""
    if r.disk is None or r.runtime is None:
        return None
    pause_ms = client_pause_ms + FSYNCS_IN_COMMIT_PAUSE * _per_fsync_ms(r)
    return 1 / (1 + pause_ms / (txn_bench.COMMIT_INTERVAL_S * 1000))


#: fsyncs P3's producer waits for one after another while it stops for a commit (issues #2 and #3: each acknowledged
#: append and each state change is durable before it is answered or acted on): its last records (the flush), then in
#: EndTxn the PrepareCommit record and the markers. The next transaction's Ongoing record (AddPartitionsToTxn) is
#: synced while the producer already sends again.
FSYNCS_IN_COMMIT_PAUSE = 3
#: fsyncs a one-record commit waits for one after another (issues #2 and #3: each state change and each append is
#: durable before it is answered or acted on): the Ongoing record (AddPartitionsToTxn), the data (Produce), the
#: PrepareCommit record and the marker (EndTxn).
SERIAL_FSYNCS_PER_COMMIT = 4
#: Client requests per one-record commit: AddPartitionsToTxn, Produce, EndTxn.
REQUESTS_PER_COMMIT = 3
#: P4's commit-rate goal: the CPU budget line asks what a commit may cost for it.
P4_COMMITS_PER_S_GOAL = 3000


@dataclass(frozen=True)
class P4Result:
    latencies_ms: list[float]
    commits: int  # in the parallel phase
    seconds: float
    broker_cpu_s: float | None  # over the parallel phase (None for the mock, which runs in-process)
    client_cpu_s: float  # the producer processes' CPU over the parallel phase (all their threads)

    @property
    def commits_per_s(self) -> float:
        return self.commits / self.seconds

    def summary(self) -> dict[str, float | None]:
        lat = self.latencies_ms
        cpu_ms = None if self.broker_cpu_s is None else self.broker_cpu_s / self.commits * 1000
        return {
            "p50_ms": machine.percentile(lat, 50),
            "p99_ms": machine.percentile(lat, 99),
            "max_ms": max(lat),
            "commits_per_s": self.commits_per_s,
            "broker_cpu_ms_per_commit": cpu_ms,
            "client_cpu_ms_per_commit": self.client_cpu_s / self.commits * 1000,
        }


def _p4(bootstrap: str, sizes: Sizes, broker: BrokerProcess | KafkaPeer | None = None) -> P4Result:
    lat = txn_bench.commit_latencies(bootstrap, sizes.p4_commits)
    cpu: list[float] = []
    on_go = None if broker is None else (lambda: cpu.append(broker.cpu_seconds()))
    par, secs, client_cpu_s = txn_bench.parallel_commits(bootstrap, sizes.p4_procs, sizes.p4_seconds, on_go=on_go)
    cpu_s = broker.cpu_seconds() - cpu[0] if broker is not None else None
    return P4Result([v * 1000 for v in lat], par, secs, cpu_s, client_cpu_s)


def p4_floors(r: Run, mock: P4Result) -> dict[str, float]:
    """What the durability order, the clients and the runtime cost before any of oncelog's own work (empty without
    the machine figures):

    - the commit p50 floor: the mock's p50 plus the serial fsyncs, each with its hand-off to the fsync helper;
    - the runtime's CPU per commit under load: echo requests plus fsync hand-offs;
    - the CPU budget of a commit at the goal rate: this machine's cores over P4_COMMITS_PER_S_GOAL, less what the
      8 clients use per commit (measured against the mock, where they use least) and the kernel's work for the
      serial fdatasyncs. What is left is all a broker may spend per commit, its runtime included.
    """
    if r.disk is None or r.runtime is None:
        return {}
    rt = r.runtime
    per_fsync_ms = _per_fsync_ms(r)
    cores = len(os.sched_getaffinity(0))
    clients_us = mock.client_cpu_s / mock.commits * 1e6
    fdatasyncs_us = SERIAL_FSYNCS_PER_COMMIT * r.disk.fdatasync_cpu_us
    return {
        "commit_p50_floor_ms": machine.percentile(mock.latencies_ms, 50) + SERIAL_FSYNCS_PER_COMMIT * per_fsync_ms,
        "runtime_cpu_us_per_commit": REQUESTS_PER_COMMIT * rt.echo_server_cpu_concurrent_us
        + SERIAL_FSYNCS_PER_COMMIT * rt.handoff_cpu_concurrent_us,
        "cores": cores,
        "client_cpu_us_per_commit_mock": clients_us,
        "fdatasync_cpu_us_per_commit": fdatasyncs_us,
        "broker_cpu_budget_us_per_commit": cores * 1e6 / P4_COMMITS_PER_S_GOAL - clients_us - fdatasyncs_us,
    }


def bench_p4(r: Run) -> None:
    s = r.sizes
    with BrokerProcess() as broker:
        txn_bench.create_topic(broker.bootstrap, txn_bench.P4_TOPIC, s.p4_procs)
        fsync = _p4(broker.bootstrap, s, broker)
    # Kafka's default durability (page cache, no fsync before acknowledging): what the fsyncs cost.
    with BrokerProcess(settings=log_write_bench.PAGECACHE_SETTINGS) as broker:
        txn_bench.create_topic(broker.bootstrap, txn_bench.P4_TOPIC, s.p4_procs)
        page = _p4(broker.bootstrap, s, broker)
    with MockCluster(1) as cluster:
        cluster.create_topic(txn_bench.P4_TOPIC, s.p4_procs)
        mock = _p4(cluster.bootstrap, s)
    r.samples["P4 one-record transaction: commit_transaction() latency"] = {
        "oncelog": fsync.latencies_ms,
        "oncelog, page cache": page.latencies_ms,
        "mock": mock.latencies_ms,
    }
    floors = p4_floors(r, mock)
    ours, theirs, paged = fsync.summary(), mock.summary(), page.summary()
    r.details["P4"] = {"oncelog": ours, "oncelog_pagecache": paged, "mock": theirs, **floors}
    floor_text = (
        f"; floor {floors['commit_p50_floor_ms']:.2f} ms = mock p50 + {SERIAL_FSYNCS_PER_COMMIT} serial x "
        f"(fdatasync {r.disk.fdatasync_p50_ms:.2f} + hand-off {r.runtime.handoff_p50_us / 1000:.2f} ms)"
        if floors and r.disk is not None and r.runtime is not None
        else ""
    )
    cpu_text = (
        ""
        if ours["broker_cpu_ms_per_commit"] is None
        else (
            f"; broker CPU {ours['broker_cpu_ms_per_commit']:.2f} ms per commit"
            + (f" (runtime alone {floors['runtime_cpu_us_per_commit']:.0f} us)" if floors else "")
        )
    )
    r.add(
        Line(
            "P4",
            f"commit p50 ms (1 producer, {len(fsync.latencies_ms)} commits)",
            ours["p50_ms"],
            ".2f",
            f"mock {theirs['p50_ms']:.2f} ms{floor_text}",
            "P4_commit_p50_ms",
        ),
        Line("P4", "commit p99 ms", ours["p99_ms"], ".2f", f"mock {theirs['p99_ms']:.2f} ms", "P4_commit_p99_ms"),
        Line(
            "P4",
            f"commits/s ({s.p4_procs} producer processes)",
            fsync.commits_per_s,
            ",.0f",
            f"mock {mock.commits_per_s:,.0f}/s{cpu_text}",
            "P4_commits_per_s",
        ),
        Line(
            "P4",
            "page cache: commit p50 ms",
            paged["p50_ms"],
            ".2f",
            f"p99 {paged['p99_ms']:.2f} ms; {page.commits_per_s:,.0f} commits/s with {s.p4_procs} producers; "
            f"broker CPU {paged['broker_cpu_ms_per_commit']:.2f} ms per commit",
            "P4_pagecache_commit_p50_ms",
        ),
    )
    if floors:
        r.add(
            Line(
                "P4",
                f"broker CPU us per commit left at {P4_COMMITS_PER_S_GOAL:,}/s",
                floors["broker_cpu_budget_us_per_commit"],
                ",.0f",
                f"= {floors['cores']} cores / {P4_COMMITS_PER_S_GOAL:,} - clients "
                f"{floors['client_cpu_us_per_commit_mock']:.0f} (mock run; "
                f"{ours['client_cpu_ms_per_commit'] * 1000:.0f} against oncelog) - kernel for "
                f"{SERIAL_FSYNCS_PER_COMMIT} fdatasyncs {floors['fdatasync_cpu_us_per_commit']:.0f}; "
                f"trio runtime alone {floors['runtime_cpu_us_per_commit']:.0f}",
                "P4_broker_cpu_budget_us_per_commit",
            )
        )
    if r.kafka:
        p4_kafka(r)


def p4_kafka(r: Run) -> None:
    """P4 against Apache Kafka: the same client, fsync per append (as oncelog's figure) and page cache."""
    s = r.sizes
    results: dict[bool, P4Result] = {}
    for fsync in (True, False):
        with KafkaPeer(fsync=fsync) as kafka:
            txn_bench.create_topic(kafka.bootstrap, txn_bench.P4_TOPIC, s.p4_procs)
            results[fsync] = _p4(kafka.bootstrap, s, kafka)
    fsync_run, page_run = results[True], results[False]
    r.samples["P4 one-record transaction: commit_transaction() latency"].update(
        {"Kafka": fsync_run.latencies_ms, "Kafka, page cache": page_run.latencies_ms}
    )
    fs, pc = fsync_run.summary(), page_run.summary()
    ours = r.add_details("P4", kafka=fs, kafka_pagecache=pc)
    version = kafka_jars.kafka_version()
    r.add(
        Line(
            "P4",
            "Kafka (fsync/append): commit p50 ms",
            fs["p50_ms"],
            ".2f",
            f"Kafka {version}; oncelog {ours['oncelog']['p50_ms']:.2f} ms",
            "P4_kafka_commit_p50_ms",
        ),
        Line("P4", "Kafka (fsync/append): commit p99 ms", fs["p99_ms"], ".2f", "", "P4_kafka_commit_p99_ms"),
        Line(
            "P4",
            f"Kafka (fsync/append): commits/s ({s.p4_procs} procs)",
            fsync_run.commits_per_s,
            ",.0f",
            f"Kafka CPU {fs['broker_cpu_ms_per_commit']:.2f} ms per commit",
            "P4_kafka_commits_per_s",
        ),
        Line(
            "P4",
            "Kafka page cache: commit p50 ms",
            pc["p50_ms"],
            ".2f",
            f"p99 {pc['p99_ms']:.2f} ms; {page_run.commits_per_s:,.0f} commits/s with {s.p4_procs} producers; "
            f"Kafka CPU {pc['broker_cpu_ms_per_commit']:.2f} ms per commit",
            "P4_kafka_pagecache_commit_p50_ms",
        ),
    )


def bench_p5(r: Run) -> None:
    s = r.sizes
    with BrokerProcess() as broker:
        txn_bench.create_topic(broker.bootstrap, e2e_bench.TOPIC, 1)
        one = e2e_bench.run(broker.bootstrap, s.p5_rate, s.p5_seconds)
    with MockCluster(1) as mock:
        mock.create_topic(e2e_bench.TOPIC, 1)
        mock_res = e2e_bench.run(mock.bootstrap, s.p5_rate, s.p5_seconds)
    kafka = None
    if r.kafka:
        with KafkaPeer(fsync=True) as kafka_peer:
            txn_bench.create_topic(kafka_peer.bootstrap, e2e_bench.TOPIC, 1)
            kafka = e2e_bench.run(kafka_peer.bootstrap, s.p5_rate, s.p5_seconds)
    results = {"oncelog": one, "mock": mock_res, **({"kafka": kafka} if kafka else {})}
    r.samples[f"P5 end-to-end latency ({s.p5_rate:,} msg/s)"] = {k: x.latencies_ms for k, x in results.items()}
    r.details["P5"] = {k: {f: v for f, v in asdict(x).items() if f != "latencies_ms"} for k, x in results.items()}
    r.add(
        Line(
            "P5",
            f"e2e p50 ms ({one.measured:,} records at {s.p5_rate:,}/s)",
            one.p50_ms,
            ".2f",
            f"mock {mock_res.p50_ms:.2f} ms (mock: fetches wait fetch.wait.max.ms=10, slows as its log grows)",
            "P5_e2e_p50_ms",
        ),
        Line(
            "P5",
            "e2e p99 ms",
            one.p99_ms,
            ".2f",
            f"mock {mock_res.p99_ms:.2f} ms; max {one.max_ms:.1f} ms",
            "P5_e2e_p99_ms",
        ),
    )
    if kafka is not None:
        r.add(
            Line(
                "P5",
                "Kafka (fsync/append) e2e p50 ms",
                kafka.p50_ms,
                ".2f",
                f"p99 {kafka.p99_ms:.2f} ms, max {kafka.max_ms:.1f} ms; same producer and read_committed consumer",
                "P5_kafka_e2e_p50_ms",
            ),
            Line("P5", "Kafka (fsync/append) e2e p99 ms", kafka.p99_ms, ".2f", "", "P5_kafka_e2e_p99_ms"),
        )


def bench_p6(r: Run) -> None:
    n = r.sizes.p6_records
    one = consume_bench.bench_oncelog(n)
    mock = consume_bench.bench_mock(n)
    kafka = consume_bench.bench_kafka(n) if r.kafka else None
    r.details["P6"] = {"oncelog": asdict(one), "mock": asdict(mock), "kafka": asdict(kafka) if kafka else None}
    r.add(
        Line(
            "P6",
            "read_committed consume rec/s oncelog / mock",
            one.records_per_s / mock.records_per_s,
            ".3f",
            f"oncelog {one.records_per_s:,.0f}, mock {mock.records_per_s:,.0f} rec/s ({n:,}, zstd)",
            "P6_consume_ratio_vs_mock",
        ),
    )
    if kafka is not None:
        r.add(
            Line(
                "P6",
                "read_committed consume rec/s oncelog / Kafka",
                one.records_per_s / kafka.records_per_s,
                ".3f",
                f"Kafka {kafka.records_per_s:,.0f} rec/s; Kafka CPU {kafka.broker_cpu_s:.2f} s, "
                f"oncelog {one.broker_cpu_s:.2f} s",
                "P6_consume_ratio_vs_kafka",
            )
        )


def bench_p7(r: Run, quick: bool) -> None:
    s = r.sizes
    res = restart_bench.run(s.p7_bytes, s.p7_producers)
    r.details["P7"] = asdict(res)
    scale = " (QUICK: scaled down from 1 GiB / 10k ids)" if quick else ""
    r.add(
        Line(
            "P7",
            "restart after SIGKILL: s until serving",
            res.seconds_to_serve,
            ".2f",
            f"{s.p7_bytes // MIB} MiB, {s.p7_producers:,} producer ids{scale}; port open after "
            f"{res.seconds_to_listen:.2f} s",
            "P7_restart_s",
        ),
    )
    if r.kafka:
        kafka = restart_bench.run_kafka(s.p7_bytes, s.p7_producers)
        r.add_details("P7", kafka=asdict(kafka))
        r.add(
            Line(
                "P7",
                "Kafka: restart after SIGKILL: s until serving",
                kafka.seconds_to_serve,
                ".2f",
                f"Kafka {kafka_jars.kafka_version()}, the same fill (took {kafka.fill_seconds:.1f} s); started "
                f"after {kafka.seconds_to_listen:.2f} s",
                "P7_kafka_restart_s",
            )
        )


def bench_p10(r: Run) -> None:
    s = r.sizes
    rate = delay_bench.forwarding_rate(s.p10_records)
    late = delay_bench.lateness(s.p10_rate, s.p10_seconds)
    r.details["P10"] = {"forwarding": asdict(rate), "lateness": asdict(late)}
    r.add(
        Line(
            "P10",
            "delayed records forwarded rec/s",
            rate.records_per_s,
            ",.0f",
            f"{rate.records:,} due at once; {rate.seconds:.2f} s from the service's start to the last; CPU per "
            f"1,000: service {rate.cpu_s_per_1000 * 1000:.1f} ms, broker {rate.broker_cpu_s_per_1000 * 1000:.1f} ms",
            "P10_delay_forward_rec_s",
        ),
        Line(
            "P10",
            "delay lateness p99 ms",
            late.p99_ms,
            ".0f",
            f"{late.offered_per_s:,.0f} rec/s offered, delays 1-5 s; p50 {late.p50_ms:.0f}, max {late.max_ms:.0f} ms; "
            f"{late.entries_per_record:.2f} level records per record",
            "P10_delay_lateness_p99_ms",
        ),
    )


def bench_p9(r: Run) -> None:
    s = r.sizes
    one = partitions_bench.throughput_oncelog(s.p9_records, s.p9_partitions, s.rounds)
    # Each 1-partition request waits for an fdatasync of its own partition's file: what that costs.
    page = partitions_bench.throughput_oncelog(
        s.p9_records, s.p9_partitions, s.rounds, log_write_bench.PAGECACHE_SETTINGS
    )
    mock = partitions_bench.throughput_mock(s.p9_records, s.p9_partitions, s.rounds)
    mem = partitions_bench.idle_memory(s.p9_partitions)
    r.details["P9"] = {
        "oncelog": {**asdict(one), "ratio": one.ratio},
        "oncelog_pagecache": {**asdict(page), "ratio": page.ratio},
        "mock": {**asdict(mock), "ratio": mock.ratio},
        "memory": {**asdict(mem), "kb_per_partition": mem.kb_per_partition},
    }
    r.add(
        Line(
            "P9",
            f"rec/s {s.p9_partitions:,} partitions / 1 partition",
            one.ratio,
            ".3f",
            f"oncelog {one.many_partitions_records_per_s:,.0f} vs {one.one_partition_records_per_s:,.0f}; "
            f"mock ratio {mock.ratio:.3f}",
            "P9_throughput_ratio_1000_vs_1",
        ),
        Line(
            "P9",
            "page cache: the same ratio",
            page.ratio,
            ".3f",
            f"oncelog {page.many_partitions_records_per_s:,.0f} vs {page.one_partition_records_per_s:,.0f}",
            "P9_pagecache_throughput_ratio",
        ),
        Line(
            "P9",
            f"idle RSS KiB per partition ({s.p9_partitions:,})",
            mem.kb_per_partition,
            ".1f",
            f"RSS {mem.rss_before_kb / 1024:.1f} -> {mem.rss_after_kb / 1024:.1f} MiB",
            "P9_idle_kb_per_partition",
        ),
    )
    if r.kafka:
        kafka = partitions_bench.throughput_kafka(s.p9_records, s.p9_partitions, s.rounds)
        r.add_details("P9", kafka={**asdict(kafka), "ratio": kafka.ratio})
        r.add(
            Line(
                "P9",
                f"Kafka (fsync/append): rec/s {s.p9_partitions:,} / 1 partition",
                kafka.ratio,
                ".3f",
                f"Kafka {kafka.many_partitions_records_per_s:,.0f} vs {kafka.one_partition_records_per_s:,.0f}",
                "P9_kafka_throughput_ratio_1000_vs_1",
            )
        )


def _rf3_vs_rf1_lines(
    r: Run, bench: str, label: str, key: str, what: str, measure: Callable[[str | None], cluster_bench.ThroughputResult]
) -> None:
    """C1 and C5: ``measure(None)`` on oncelog's cluster, then ``measure(name)`` on Apache Kafka's (unless
    ``--no-kafka``); the ratio line with Kafka's beside it, and a line of where the CPU went in both."""
    ours = measure(None)
    kafka = measure(f"Kafka {kafka_jars.kafka_version()}") if r.kafka else None
    r.details[bench] = {**ours.summary(), "kafka": kafka.summary() if kafka else None}
    beside = f"oncelog {ours.rf3:,.0f} vs {ours.rf1:,.0f} rec/s, {what}"
    if kafka is not None:
        beside += f"; {kafka.system}: {kafka.ratio:.3f} ({kafka.rf3:,.0f} vs {kafka.rf1:,.0f} rec/s)"
    r.add(Line(bench, label, ours.ratio, ".3f", beside, key))
    for res in [ours] if kafka is None else [ours, kafka]:
        # (factor 3 vs factor 1) of every part but the brokers, whose factor-3 figure is the line's value
        others = [part for part in res.rf3_cpu_us_per_record[0] if part != "brokers"]
        beside = "; ".join(f"{part} {res.cpu_us(3, part):.2f} vs {res.cpu_us(1, part):.2f}" for part in others)
        r.add(
            Line(
                bench,
                f"{res.system}: brokers' CPU us/record, factor 3",
                res.cpu_us(3, "brokers"),
                ".2f",
                f"factor 1 {res.cpu_us(1, 'brokers'):.2f}; {beside}",
            )
        )


def bench_c1(r: Run) -> None:
    _rf3_vs_rf1_lines(
        r,
        "C1",
        "acks=all rec/s, replication factor 3 / 1",
        "C1_rf3_vs_rf1_acks_all",
        "3 brokers, every replica fsyncs",
        lambda kafka: cluster_bench.throughput(r.sizes.c1_records, r.sizes.rounds, kafka=kafka),
    )


def bench_c2(r: Run) -> None:
    res = cluster_bench.failover(r.sizes.cluster_trials, session_timeout_ms=2000)
    r.details["C2"] = asdict(res)
    r.add(
        Line(
            "C2",
            "failover s, leader SIGKILL to next acks=all ack, p50",
            res.p50,
            ".2f",
            f"worst {res.worst:.2f} s over {len(res.seconds)}; new leader in Metadata after p50 "
            f"{statistics.median(res.leader_moved_seconds):.2f} s; broker.session.timeout.ms {res.session_timeout_ms}",
            "C2_failover_p50_s",
        )
    )


def bench_c3(r: Run) -> None:
    res = cluster_bench.controlled_shutdown_pause(r.sizes.cluster_trials)
    r.details["C3"] = asdict(res)
    r.add(
        Line(
            "C3",
            "produce pause s during a controlled shutdown, worst",
            res.worst,
            ".3f",
            f"p50 {res.p50:.3f} s over {len(res.seconds)} shutdowns of the leader",
            "C3_controlled_shutdown_pause_s",
        )
    )


def bench_c4(r: Run) -> None:
    res = cluster_bench.coordinator_failover(r.sizes.cluster_trials)
    r.details["C4"] = asdict(res)
    r.add(
        Line(
            "C4",
            "txn coordinator SIGKILL to next commit s, p50",
            res.p50,
            ".2f",
            f"worst {res.worst:.2f} s over {len(res.seconds)} kills; retried commits {res.retried}, "
            f"aborted {res.aborted}, new producers {res.replaced}",
            "C4_txn_coordinator_failover_p50_s",
        )
    )


def bench_c5(r: Run) -> None:
    """C5 on oncelog's cluster with its default commit order (the goal's line) and with Kafka's
    (``transaction.marker.wait.ms=0``), then on Kafka's cluster."""
    kafka_order = cluster_bench.transactional_throughput(r.sizes.c5_records, r.sizes.rounds, kafka_order=True)
    _rf3_vs_rf1_lines(
        r,
        "C5",
        "transactional rec/s, replication factor 3 / 1",
        "C5_txn_rf3_vs_rf1",
        "a commit every 100 ms",
        lambda kafka: cluster_bench.transactional_throughput(r.sizes.c5_records, r.sizes.rounds, kafka=kafka),
    )
    r.details["C5"]["kafka_order"] = kafka_order.summary()
    r.add(
        Line(
            "C5",
            "the same in Kafka's commit order",
            kafka_order.ratio,
            ".3f",
            f"transaction.marker.wait.ms=0: {kafka_order.rf3:,.0f} vs {kafka_order.rf1:,.0f} rec/s; brokers' CPU "
            f"us/record factor 3 {kafka_order.cpu_us(3, 'brokers'):.2f}, factor 1 "
            f"{kafka_order.cpu_us(1, 'brokers'):.2f}; client {kafka_order.cpu_us(3, 'client'):.2f} vs "
            f"{kafka_order.cpu_us(1, 'client'):.2f}",
            "C5_txn_rf3_vs_rf1_kafka_order",
        )
    )


def bench_s1(r: Run) -> None:
    """The Spark pipeline (issue 27): batch read and exactly-once streaming copy in local[2]; beside each, the
    Python half alone in records per CPU second (no peer runs Spark in the same run)."""
    res = spark_bench.measure(r.sizes.s1_records, 2)
    r.details["S1"] = asdict(res)
    r.add(
        Line(
            "S1",
            "Spark batch read rec/s (local[2])",
            res.read_rec_s,
            ",.0f",
            f"first read of the session {res.read_cold_rec_s:,.0f} rec/s; read_range alone "
            f"{res.read_range_cpu_rec_s:,.0f} rec/s of CPU; {res.records:,} records",
            "S1_spark_batch_read_rec_s",
        ),
        Line(
            "S1",
            "Spark exactly-once streaming copy rec/s",
            res.copy_rec_s,
            ",.0f",
            f"the session's second streaming query; its first {res.copy_first_rec_s:,.0f} rec/s; "
            f"write_task alone {res.write_task_cpu_rec_s:,.0f} rec/s of CPU",
            "S1_spark_copy_rec_s",
        ),
    )


#: B1's clients: the bundled async client on both backends, and its peer.
B1_CLIENTS = ("oncelog-asyncio", "oncelog-trio", client_bench.PEER)
#: Interleaved rounds of every B1 client, each phase's fastest kept: a read of 1M records takes about a second, so
#: one busy spell of the machine (a JVM exiting) moves a single round by a third either way.
B1_ROUNDS = 2


def bench_b1(r: Run) -> None:
    """The bundled client against aiokafka (issue 27 item 1), each against the same broker in this run, the fastest
    of ``B1_ROUNDS`` interleaved rounds per phase: the lowest of its records/s ratios over both backends and the three
    phases (produce, consume, read_committed consume)."""
    n = r.sizes.b1_records
    best = client_bench.measure(n, rounds=B1_ROUNDS, only=list(B1_CLIENTS))
    rates = {name: {phase: n / best[name][phase][0] for phase in client_bench.PHASES} for name in best}
    ratios = {
        (name, phase): rates[name][phase] / rates[client_bench.PEER][phase]
        for name in B1_CLIENTS[:2]
        for phase in client_bench.PHASES
    }
    r.details["B1"] = {
        "records": n,
        "records_per_s": rates,
        "cpu_s": {k: {p: t[1] for p, t in v.items()} for k, v in best.items()},
    }
    (worst_name, worst_phase), worst = min(ratios.items(), key=lambda item: item[1])
    peer = rates[client_bench.PEER]
    r.add(
        Line(
            "B1",
            "bundled client rec/s / aiokafka's, lowest of 6",
            worst,
            ".2f",
            f"{worst_name} {worst_phase}; aiokafka produce {peer['produce']:,.0f}, consume {peer['consume']:,.0f}, "
            f"read_committed {peer['consume_rc']:,.0f} rec/s; {n:,} records",
            "B1_client_vs_aiokafka",
        )
    )


# ---- the driver -----------------------------------------------------------------------------------------------


def git_commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True)
        return out.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def machine_description() -> str:
    mem_kb = int(
        next(ln for ln in Path("/proc/meminfo").read_text().splitlines() if ln.startswith("MemTotal")).split()[1]
    )
    return f"{os.cpu_count()} cores, {mem_kb / 1024 / 1024:.0f} GiB, {platform.system()} {platform.release()}"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="oncelog benchmark suite (P1-P7, P9, P10)")
    parser.add_argument("--quick", action="store_true", help="scaled-down run, about 4 minutes")
    parser.add_argument("--only", default=",".join(BENCHES), help="comma list of P1-P7, P9, P10, C1-C5, S1, B1")
    parser.add_argument("--records", type=int, help="record count of P1, P3, P6 and P9")
    parser.add_argument("--json", type=Path, help="write the figures (and details) as JSON here")
    parser.add_argument("--plot", type=Path, help="write a PNG of the P4/P5 latency distributions (matplotlib)")
    parser.add_argument("--profile", type=Path, help="attach py-spy to every broker; raw profiles go here")
    parser.add_argument(
        "--no-kafka", dest="kafka", action="store_false", help="leave Apache Kafka out of P1-P7, P9, C1 and C5"
    )
    parser.add_argument(
        "--kafka-bootstrap",
        help="HOST:PORT of a running Apache Kafka that fsyncs every append, for P1 (else it starts one)",
    )
    args = parser.parse_args(argv)
    args.only = [b.strip().upper() for b in args.only.split(",") if b.strip()]
    unknown = [b for b in args.only if b not in BENCHES]
    if unknown:
        parser.error(f"unknown benchmarks {unknown}; choose from {', '.join(BENCHES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = QUICK if args.quick else FULL
    if args.records:
        n = args.records
        sizes = Sizes(**{**asdict(sizes), "p1_records": n, "p3_records": n, "p6_records": n, "p9_records": n})
    with_kafka = {"P1", "P2", "P3", "P4", "P5", "P6", "P7", "P9", "C1", "C5"}
    run = Run(sizes, kafka=args.kafka and bool(with_kafka & set(args.only)))
    if run.kafka:
        run.kafka_bootstrap = args.kafka_bootstrap
    if run.kafka:
        try:
            print(f"Apache Kafka's jars: {kafka_jars.ensure()} (java/pom.xml)", flush=True)
        except kafka_jars.JavaUnavailable as error:
            print(f"{error}\n(--no-kafka runs without the Kafka column)", file=sys.stderr)
            return 2
    started = time.time()
    head = (
        f"oncelog benchmark suite, {'QUICK' if args.quick else 'full'} run; commit {git_commit()}; "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(started))}; {machine_description()}; "
        f"load average {os.getloadavg()[0]:.2f} at start"
    )
    print(head, flush=True)

    profiler = None
    if args.profile:
        from bench.profiling import BrokerProfiler

        profiler = BrokerProfiler(args.profile).install()
    steps: list[tuple[str, Callable[[], None]]] = []
    if {"P2", "P3", "P4", "P5"} & set(args.only):
        steps.append(("machine", lambda: bench_machine(run)))
    for name, fn in (
        ("P1", bench_p1),
        ("P2", bench_p2),
        ("P3", bench_p3),
        ("P4", bench_p4),
        ("P5", bench_p5),
        ("P6", bench_p6),
        ("B1", bench_b1),
        ("P9", bench_p9),
        ("P10", bench_p10),
        ("C1", bench_c1),
        ("C2", bench_c2),
        ("C3", bench_c3),
        ("C4", bench_c4),
        ("C5", bench_c5),
        ("S1", bench_s1),
    ):
        if name in args.only:
            steps.append((name, lambda fn=fn: fn(run)))
    if "P7" in args.only:
        after_p7 = sum(name in args.only for name in ("P9", "P10", "C1", "C2", "C3", "C4", "C5", "S1"))
        steps.insert(len(steps) - after_p7, ("P7", lambda: bench_p7(run, args.quick)))
    io_stalls: dict[str, float] = {}
    try:
        for name, step in steps:
            t0, stall0 = time.time(), machine.io_full_stall_us()
            print(f"[{name}] ...", flush=True)
            if profiler is not None:
                profiler.label = name
            step()
            seconds, stall1 = time.time() - t0, machine.io_full_stall_us()
            stalled = ""
            if stall0 is not None and stall1 is not None:
                io_stalls[name] = (stall1 - stall0) / 1e6 / seconds
                stalled = f"; I/O stalled {io_stalls[name]:.0%}"
            print(f"[{name}] done in {seconds:.1f} s{stalled}", flush=True)
    finally:
        if profiler is not None:
            profiler.close()
    elapsed = time.time() - started
    print()
    print(head)
    print(table(run.lines))
    print(
        f"total {elapsed:.0f} s; load average {os.getloadavg()[0]:.2f} at the end "
        "(other processes on this machine skew every figure; pairs are measured back to back)"
    )
    if io_stalls:
        # Linux PSI "full": the share of each benchmark's wall time in which every running task waited for I/O.
        # Tens of percent while the benchmark itself writes little mean the disk under this VM was stalling.
        print("I/O stalled (PSI full): " + ", ".join(f"{name} {share:.0%}" for name, share in io_stalls.items()))
    run.details["io_stalled_share"] = io_stalls

    if args.json:
        doc: dict[str, object] = to_json(run.lines)
        doc["meta"] = {
            "quick": args.quick,
            "only": args.only,
            "commit": git_commit(),
            "machine": machine_description(),
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "seconds": elapsed,
            "sizes": asdict(sizes),
        }
        doc["details"] = run.details
        args.json.write_text(json.dumps(doc, indent=2) + "\n")
    if args.plot:
        from bench import plot

        if not run.samples:
            print("no latency samples (P4/P5 not run): no plot")
        elif not plot.available():
            print("matplotlib is not installed: no plot (uv pip install matplotlib)")
        else:
            goals = {name: ([2.0, 10.0]) for name in run.samples}
            plot.latency_cdfs(
                run.samples,
                goals,
                args.plot,
                f"oncelog vs librdkafka mock, commit {git_commit()}, {machine_description()}",
            )
            print(f"plot: {args.plot}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
