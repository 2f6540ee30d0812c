"""Chaos harness for the exactly-once copier (``copier.py``): input data, copier subprocesses, kills, the final check.

``run_chaos(broker, client, ...)`` fills a 3-partition input topic in chunks, and runs copier subprocesses while
SIGKILLing the copier and the broker (restarted on the same data dir and port) in a seeded random order, one kill
per chunk, a moment after the copier has committed part of it; then it lets the last copier
finish, runs one more copier that must find nothing left to copy, and reads the output with read_committed.
``exactly_once_problems(result)`` compares the full multisets (partition, key, value, src header) of the transformed
input and the output: empty means every input record is in the output exactly once and nothing else is.
"""

from __future__ import annotations

import collections
import random
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from .broker import BrokerProcess
from .copier import SRC_HEADER, src_header, transform
from .topics import create_topic_confluent

PARTITIONS = 3
COPIER = Path(__file__).resolve().with_name("copier.py")
#: A copier that does not finish in this long after the chaos is considered hung.
FINISH_DEADLINE_S = 60.0
#: Non-zero copier exits (other than our kills) tolerated while finishing, e.g. while the broker restarts.
MAX_FINISH_RESTARTS = 5
#: (partition, key, value, src header) of one output record.
Row = tuple[int, bytes | None, bytes | None, bytes | None]


class CopierProcess:
    """One copier subprocess; its stdout lines are collected by a thread."""

    def __init__(self, argv: list[str], log_path: Path) -> None:
        self.lines: list[str] = []
        self._log = open(log_path, "ab")  # noqa: SIM115 -- closed in wait()/kill()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=self._log, stdin=subprocess.DEVNULL)
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").strip()
            self._log.write(f"[stdout] {line}\n".encode())
            self.lines.append(line.split(" ", 1)[-1])  # without the copier's time stamp

    def commits(self) -> int:
        return sum(1 for line in self.lines if line.startswith("committed "))

    def poll(self) -> int | None:
        return self.proc.poll()

    def wait(self, timeout_s: float) -> int:
        code = self.proc.wait(timeout_s)
        self._reader.join(5)
        self._log.close()
        return code

    def kill(self) -> int:
        self.proc.kill()
        return self.wait(10)


@dataclass
class ChaosResult:
    records: int
    input_rows: list[Row]
    output_rows: list[Row]
    copier_kills: int = 0
    broker_kills: int = 0
    copier_starts: int = 0
    #: Exit codes of copiers that stopped by themselves before the end (e.g. fenced or fatal during a broker kill).
    unexpected_exits: list[int] = field(default_factory=list)
    final_lines: list[str] = field(default_factory=list)
    #: Output data records read_uncommitted sees but read_committed does not (written by aborted transactions).
    aborted_records: int = 0
    seconds: float = 0.0


def produce_input(bootstrap: str, topic: str, records: int, first: int = 0) -> list[Row]:
    """Records ``first .. first+records-1``, keyed, round-robin over the partitions; returns what the copier must
    write for each."""
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    rows: list[Row] = []
    errors: list[str] = []

    def report(err: KafkaError | None, msg: object) -> None:
        if err is not None:
            errors.append(str(err))
            return
        p, o = msg.partition(), msg.offset()  # type: ignore[attr-defined]
        rows.append((p, msg.key(), transform(msg.value()), src_header(p, o)))  # type: ignore[attr-defined]

    for i in range(first, first + records):
        value = b"value-%d-" % i + b"x" * (i % 50)
        producer.produce(topic, key=b"k%d" % i, value=value, partition=i % PARTITIONS, on_delivery=report)
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0, "input not delivered in 30 s"
    assert not errors, errors[:5]
    return rows


def read_committed(
    bootstrap: str, topic: str, deadline_s: float = 30.0, *, isolation: str = "read_committed"
) -> list[Row]:
    """Every record read_committed (or ``isolation``) sees in ``topic`` (all partitions, from the beginning, up to
    each end)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "copier-check-unused",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        rows: list[Row] = []
        at_end: set[int] = set()
        end = time.monotonic() + deadline_s
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < end, f"output not read to its end in {deadline_s}s ({len(rows)} records)"
            for m in consumer.consume(num_messages=5000, timeout=0.5):
                err = m.error()
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, f"consumer error: {err}"
                    at_end.add(m.partition())
                    continue
                at_end.discard(m.partition())
                headers = dict(m.headers() or ())
                rows.append((m.partition(), m.key(), m.value(), headers.get(SRC_HEADER)))
        return rows
    finally:
        consumer.close()


def exactly_once_problems(result: ChaosResult) -> list[str]:
    """Differences between the transformed input and the output, as multisets (empty list: exactly once)."""
    want = collections.Counter(result.input_rows)
    got = collections.Counter(result.output_rows)
    problems = []
    missing = want - got
    extra = got - want
    duplicated = [row for row, n in got.items() if n > 1]
    if len(result.input_rows) != result.records:
        problems.append(f"input holds {len(result.input_rows)} records, expected {result.records}")
    if missing:
        problems.append(f"{sum(missing.values())} input records missing from the output, e.g. {list(missing)[:3]}")
    if duplicated:
        problems.append(f"{len(duplicated)} output records duplicated, e.g. {duplicated[:3]}")
    if extra - collections.Counter(duplicated):
        problems.append(f"output records not from the input, e.g. {list(extra - collections.Counter(duplicated))[:3]}")
    return problems


class Chaos:
    """Runs copiers for one (broker, client, topics) and kills things on request."""

    def __init__(self, broker: BrokerProcess, client: str, log_dir: Path, tag: str, batch: int) -> None:
        self.broker = broker
        self.client = client
        self.log_dir = log_dir
        self.tag = tag
        self.batch = batch
        self.input, self.output = f"{tag}-in", f"{tag}-out"
        self.starts = 0

    def start_copier(self, *, idle_s: float = 2.0) -> CopierProcess:
        self.starts += 1
        argv = [
            sys.executable,
            str(COPIER),
            "--client",
            self.client,
            "--bootstrap",
            self.broker.bootstrap,
            "--group",
            f"{self.tag}-group",
            "--input",
            self.input,
            "--output",
            self.output,
            "--transactional-id",
            f"{self.tag}-txn",
            "--instance-id",
            f"{self.tag}-copier",
            "--batch",
            str(self.batch),
            "--idle-s",
            str(idle_s),
        ]
        return CopierProcess(argv, self.log_dir / f"{self.tag}-copier-{self.starts}.log")

    def log_tail(self, limit: int = 3000) -> str:
        path = self.log_dir / f"{self.tag}-copier-{self.starts}.log"
        return path.read_bytes()[-limit:].decode(errors="replace") if path.exists() else ""


def _wait_for_progress(copier: CopierProcess, commits: int, timeout_s: float) -> None:
    end = time.monotonic() + timeout_s
    while copier.commits() < commits and copier.poll() is None and time.monotonic() < end:
        time.sleep(0.02)


def run_chaos(
    broker: BrokerProcess,
    client: str,
    log_dir: Path,
    *,
    records: int = 10000,
    copier_kills: int = 3,
    broker_kills: int = 1,
    batch: int = 100,
    seed: int = 1,
    tag: str = "copy",
) -> ChaosResult:
    """See the module docstring. ``broker`` must be running; it is running again when this returns."""
    started = time.monotonic()
    rng = random.Random(seed)
    chaos = Chaos(broker, client, log_dir, tag, batch)
    create_topic_confluent(broker.bootstrap, chaos.input, PARTITIONS)
    create_topic_confluent(broker.bootstrap, chaos.output, PARTITIONS)
    events = ["copier"] * copier_kills + ["broker"] * broker_kills
    rng.shuffle(events)
    # The input arrives in one chunk per event (and one more), so that every kill finds the copier busy.
    chunks = [records * k // (len(events) + 1) for k in range(len(events) + 2)]
    result = ChaosResult(records, [], [])
    copier = chaos.start_copier()
    for k, event in enumerate(events):
        result.input_rows += produce_input(broker.bootstrap, chaos.input, chunks[k + 1] - chunks[k], chunks[k])
        # Let the copier commit a transaction or two, then strike at a random moment of the next ones.
        _wait_for_progress(copier, copier.commits() + rng.randint(1, 2), 30.0)
        time.sleep(rng.uniform(0.0, 0.02))  # a transaction takes ~10 ms: often lands inside the next one
        code = copier.poll()
        if code is not None:
            copier.wait(5)
            if code != 0:
                result.unexpected_exits.append(code)
            copier = chaos.start_copier()
        if event == "copier":
            copier.kill()
            result.copier_kills += 1
            copier = chaos.start_copier()
        else:
            broker.kill()
            result.broker_kills += 1
            time.sleep(rng.uniform(0.0, 1.0))
            broker.start()

    result.input_rows += produce_input(broker.bootstrap, chaos.input, chunks[-1] - chunks[-2], chunks[-2])
    for _ in range(MAX_FINISH_RESTARTS + 1):
        try:
            code = copier.wait(FINISH_DEADLINE_S)
        except subprocess.TimeoutExpired:
            copier.kill()
            raise AssertionError(f"copier hung for {FINISH_DEADLINE_S}s:\n{chaos.log_tail()}") from None
        if code == 0:
            break
        result.unexpected_exits.append(code)
        copier = chaos.start_copier()
    else:
        raise AssertionError(f"copier kept failing: exits {result.unexpected_exits}\n{chaos.log_tail()}")

    final = chaos.start_copier(idle_s=1.0)
    code = final.wait(FINISH_DEADLINE_S)
    result.final_lines = list(final.lines)
    assert code == 0, f"final copier exited {code}:\n{chaos.log_tail()}"
    result.copier_starts = chaos.starts
    result.output_rows = read_committed(broker.bootstrap, chaos.output)
    everything = read_committed(broker.bootstrap, chaos.output, isolation="read_uncommitted")
    result.aborted_records = len(everything) - len(result.output_rows)
    result.seconds = time.monotonic() - started
    return result
