"""Spark pipeline throughput (not part of CI): exactly-once streaming copy in local[2] and batch read.

    .venv/bin/python bench/spark_bench.py [--records 500000] [--partitions 2]

Starts its own broker (free 127.0.0.1 port, temporary data dir), fills a topic, then measures
(1) a batch read of the whole topic (rows/s), twice: the first full read of the session (the JVM still compiles its
Arrow-to-row code) and the second, the figure the goal is for; and (2) a Structured Streaming copy with
Trigger.AvailableNow into another topic with exactly-once writes (records/s of the whole query, its own start
included), twice, into two topics: the session's first query, which also pays what a session pays once (the JVM
compiling its streaming code, the Python daemons Spark starts to plan writes and to commit), and the second, the figure
the goal is for, as for the read: a streaming copy runs in a long-lived session.
Before Spark starts it times the Python halves alone, in this process: ``read_range`` of one partition and
``write_task`` of the same rows (records/s by wall clock and by this process's CPU time, which stays meaningful
on a loaded machine), so a slow figure can be laid on the Python side or on Spark's.
Each Spark figure comes with its split (``pipeline.stage_log``, seconds): start-up until the first task reads, the
tasks' read and write spans with their CPU, the driver's commit, the tail after the last stage, and the CPU over the
job of the driver JVM, of the JVM with every Python process it started (``spark_cpu``), and of the broker. The
session uses ``spark.python.daemon.module=oncelog.pipeline.daemon`` (README, "Spark").
Goals: streaming copy >= 100k records/s, batch read >= 300k records/s.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.broker import BrokerProcess, child_pids, process_cpu_seconds

# Workers forked by this daemon start with the data source's modules loaded (pyspark.daemon where it is missing,
# so that the script also measures an older checkout).
DAEMON = "oncelog.pipeline.daemon" if importlib.util.find_spec("oncelog.pipeline.daemon") else "pyspark.daemon"
GOAL_COPY = 100_000
GOAL_READ = 300_000


def fill(bootstrap: str, topic: str, partitions: int, n: int) -> None:
    from oncelog.client.sync import Admin, Producer

    with Admin(bootstrap) as admin:
        admin.create_topic(topic, partitions)
    value = b"x" * 100
    with Producer(bootstrap, linger_ms=20, batch_size=512 * 1024) as p:
        for i in range(n):
            p.send(topic, value, str(i).encode())
        p.flush()


def python_halves(bootstrap: str, topic: str) -> dict[str, float]:
    """Time ``read_range`` of partition 0 of ``topic`` and ``write_task`` of its (key, value) rows, without Spark;
    returns records per CPU second of each (``read_range`` / ``write_task``)."""
    from oncelog.client import TopicPartition
    from oncelog.client.sync import Admin
    from oncelog.pipeline import offsets
    from oncelog.pipeline.offsets import OffsetRange
    from oncelog.pipeline.options import SinkOptions, SourceOptions
    from oncelog.pipeline.range_reader import read_range
    from oncelog.pipeline.txn_task import write_task

    source = SourceOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, streaming=False)
    end = offsets.snapshot(source).latest[TopicPartition(topic, 0)]
    batches = []

    def read() -> int:
        batches.extend(read_range(bootstrap, OffsetRange(topic, 0, 0, end)))
        return sum(b.num_rows for b in batches)

    with Admin(bootstrap) as admin:
        admin.create_topic("bench-halves", 1)
    sink = SinkOptions.parse({"kafka.bootstrap.servers": bootstrap, "topic": "bench-halves"}, streaming=False)
    cpu_rates: dict[str, float] = {}
    for label, run in (
        ("read_range", read),
        ("write_task", lambda: write_task(sink, 0, 0, [b.select(["key", "value"]) for b in batches]).rows),
    ):
        wall, cpu = time.perf_counter(), time.process_time()
        n = run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(f"python {label}: {n:,} records, {n / wall:,.0f} rec/s wall, {n / cpu:,.0f} rec/s of this process's CPU")
        cpu_rates[label] = n / cpu
    return cpu_rates


def bytecode_cached(module: str) -> bool:
    """Whether ``module`` loads from cached bytecode (its ``__pycache__`` file exists): without it, every Python
    process Spark starts compiles it from source again (``PYTHONDONTWRITEBYTECODE`` keeps it from being written;
    pip compiles an install's bytecode, ``uv sync`` only with ``--compile-bytecode``)."""
    spec = importlib.util.find_spec(module)
    origin = spec.origin if spec is not None else None
    return origin is not None and os.path.exists(importlib.util.cache_from_source(origin))


def cpu_of(pids: list[int]) -> float:
    """CPU seconds so far of the processes ``pids`` still running."""
    total = 0.0
    for pid in pids:
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            total += process_cpu_seconds(pid)
    return total


def jvm_pids() -> list[int]:
    """The Spark driver's JVM (this process's java descendants)."""
    out, todo = [], child_pids(os.getpid())
    while todo:
        pid = todo.pop()
        with contextlib.suppress(FileNotFoundError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == "java":
                out.append(pid)
                continue
            todo.extend(child_pids(pid))
    return out


def tree_cpu(pid: int) -> float:
    """CPU seconds of process ``pid`` and all its descendants, live ones and ended ones their parents waited for
    (the JVM and every Python daemon and worker it started)."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        with contextlib.suppress(FileNotFoundError, ProcessLookupError):
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")  # utime stime cutime cstime
            todo.extend(child_pids(p))
    return total


def stage_split(path: str, since: float, until: float) -> dict[str, float]:
    """Where one Spark job's wall time went, from the data source's stage log (``pipeline.stage_log``): ``startup``
    (job start to the first task's read), ``source_ready`` (job start to the source's first offset call: Spark has
    started the source's Python process) and ``driver_cpu`` (that process's offset calls), ``read`` and ``write``
    (first start to last end of the tasks' stages; a write task pulls its input from the read, so the two overlap),
    ``commit`` (the driver's), and ``tail`` (the last stage's end to the job's end), in seconds."""
    try:
        with open(path) as f:
            logged = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        logged = []
    stages = [s for s in logged if since <= s["start"] <= until]
    out: dict[str, float] = {}
    first = min((s["start"] for s in stages if s["stage"] in ("read", "write")), default=None)
    if first is not None:
        out["startup"] = first - since
    driver = [s for s in stages if s["stage"] == "driver"]
    if driver:  # the source's offset calls at the query's start
        out["source_ready"] = min(s["start"] for s in driver) - since
        out["driver_cpu"] = sum(s["cpu"] for s in driver)
    for name in ("read", "write", "commit"):
        mine = [s for s in stages if s["stage"] == name]
        if mine:
            out[name] = max(s["end"] for s in mine) - min(s["start"] for s in mine)
            out[f"{name}_cpu"] = sum(s["cpu"] for s in mine)
            out[f"{name}_end"] = max(s["end"] for s in mine) - since
    if stages:
        out["tail"] = until - max(s["end"] for s in stages)
    return {k: round(v, 2) for k, v in out.items()}


@dataclass(frozen=True)
class SparkFigures:
    """One run: Spark's batch read and exactly-once streaming copy (rec/s), and the Python halves alone (rec/s of
    CPU)."""

    records: int
    read_rec_s: float
    copy_rec_s: float
    read_range_cpu_rec_s: float
    write_task_cpu_rec_s: float
    read_cold_rec_s: float = 0.0  # the first full read of the session (JVM not yet compiled)
    copy_first_rec_s: float = 0.0  # the session's first streaming query (once-per-session costs included)


def measure(records: int, partitions: int) -> SparkFigures:
    """Fill a topic of ``records`` x 100 B over ``partitions``, then time the Python halves, a batch read and an
    exactly-once streaming copy in local[2] (printing each figure as it comes)."""
    os.environ.setdefault("JAVA_HOME", "/usr/lib/jvm/java-17-openjdk-amd64")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from oncelog.client.sync import Admin
    from oncelog.pipeline.spark import OncelogDataSource
    from pyspark.sql import SparkSession

    cached = {m: bytecode_cached(m) for m in ("anyio._backends._asyncio", "pyarrow.compute", "oncelog.client.admin")}
    print(f"bytecode cached: {cached}; PYTHONDONTWRITEBYTECODE={os.environ.get('PYTHONDONTWRITEBYTECODE', '')!r}")
    with tempfile.TemporaryDirectory() as tmp, BrokerProcess(Path(tmp) / "data") as broker:
        stage_log = os.path.join(tmp, "stages.jsonl")
        os.environ["ONCELOG_SPARK_STAGE_LOG"] = (
            stage_log  # pipeline.stage_log.STAGE_LOG_ENV  # before the session starts: its Python workers inherit it
        )
        bs = broker.bootstrap
        t0 = time.perf_counter()
        fill(bs, "bench-in", partitions, records)
        print(f"fill: {records / (time.perf_counter() - t0):,.0f} rec/s")
        halves = python_halves(bs, "bench-in")
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.python.daemon.module", DAEMON)  # README: what a user should set
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        spark.dataSource.register(OncelogDataSource)

        def reader() -> Any:
            return spark.read.format("oncelog").option("kafka.bootstrap.servers", bs).option("subscribe", "bench-in")

        # warm-up: a Python worker per core, connections, the JVM's first queries (10 records of every partition)
        first = json.dumps({"bench-in": {str(p): 10 for p in range(partitions)}})
        reader().option("endingOffsets", first).load().collect()
        cpu_pids = [*jvm_pids(), broker.pid]

        def timed_read(label: str) -> float:
            jvm_cpu, broker_cpu, spark_cpu = cpu_of(cpu_pids[:-1]), cpu_of(cpu_pids[-1:]), tree_cpu(cpu_pids[0])
            t0, since = time.perf_counter(), time.time()
            n = reader().load().selectExpr("sum(length(value))").collect()[0][0] // 100
            dt = time.perf_counter() - t0
            split = stage_split(stage_log, since, time.time())
            split["jvm_cpu"] = round(cpu_of(cpu_pids[:-1]) - jvm_cpu, 2)
            split["broker_cpu"] = round(cpu_of(cpu_pids[-1:]) - broker_cpu, 2)
            split["spark_cpu"] = round(tree_cpu(cpu_pids[0]) - spark_cpu, 2)
            print(
                f"{label}: {n:,} records in {dt:.2f} s = {n / dt:,.0f} rec/s "
                f"(goal >= {GOAL_READ:,}: {'met' if n / dt >= GOAL_READ else 'MISS'})\n  stages (s): {split}"
            )
            return n / dt

        # The first full read runs while the JVM still interprets the Arrow-to-row code (its JIT compiles it
        # meanwhile): reported, but the goal is for the second, as in a long-running session.
        cold_rate = timed_read("batch read, first in the session (cold JVM)")
        read_rate = timed_read("batch read")

        def timed_copy(label: str, out: str) -> float:
            """One Trigger.AvailableNow exactly-once copy of the whole input into the new topic ``out``."""
            with Admin(bs) as admin:
                admin.create_topic(out, partitions)
            jvm_cpu, broker_cpu, spark_cpu = cpu_of(cpu_pids[:-1]), cpu_of(cpu_pids[-1:]), tree_cpu(cpu_pids[0])
            t0, since = time.perf_counter(), time.time()
            q = (
                spark.readStream.format("oncelog")
                .option("kafka.bootstrap.servers", bs)
                .option("subscribe", "bench-in")
                .option("startingOffsets", "earliest")
                .load()
                .select("key", "value")
                .writeStream.format("oncelog")
                .option("kafka.bootstrap.servers", bs)
                .option("topic", out)
                .option("checkpointLocation", os.path.join(tmp, f"ck-{out}"))
                .trigger(availableNow=True)
                .start()
            )
            q.awaitTermination()
            dt = time.perf_counter() - t0
            copy_split = stage_split(stage_log, since, time.time())
            data_s = copy_split.get("write_end", 0) - copy_split.get("startup", 0)
            copy_split["jvm_cpu"] = round(cpu_of(cpu_pids[:-1]) - jvm_cpu, 2)
            copy_split["broker_cpu"] = round(cpu_of(cpu_pids[-1:]) - broker_cpu, 2)
            copy_split["spark_cpu"] = round(tree_cpu(cpu_pids[0]) - spark_cpu, 2)
            rate = records / dt
            print(f"{label}: {records:,} records in {dt:.2f} s = {rate:,.0f} rec/s")
            print(f"  stages (s): {copy_split}")
            print(f"  Spark's durationMs per batch: {[p['durationMs'] for p in q.recentProgress]}")
            if data_s > 0:
                print(f"  from the first task's read to the last write: {records / data_s:,.0f} rec/s")
            return rate

        # The session's first query also pays what a session pays once (the JVM's first streaming query, the Python
        # daemons Spark starts to plan writes and to commit): reported, but the goal is for the second, as for the
        # read: its own start (a source process, planning, the commit) is in it.
        first = timed_copy("exactly-once streaming copy, the session's first query", "bench-out")
        rate = timed_copy("exactly-once streaming copy", "bench-out-2")
        print(f"  goal >= {GOAL_COPY:,}: {'met' if rate >= GOAL_COPY else 'MISS'}")
        spark.stop()
    return SparkFigures(records, read_rate, rate, halves["read_range"], halves["write_task"], cold_rate, first)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--partitions", type=int, default=2)
    args = ap.parse_args()
    measure(args.records, args.partitions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
