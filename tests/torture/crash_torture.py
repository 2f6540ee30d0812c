"""Crash torture: a transactional copier (confluent-kafka) copies an input topic into an output topic while the broker
is SIGKILLed at random moments and at every named fault point; afterwards the output must be exactly the
transformed input: no record lost, none duplicated, nothing from an aborted transaction visible to read_committed.

The copier is assign-based (no consumer groups): it reads each input partition with a read_committed consumer and
writes transformed records to the same partition of the output topic, one transaction per batch. Its progress lives
in memory only; after any failure it drops its clients, starts a new transactional producer (``init_transactions``
fences the old one and aborts or completes its transaction) and resumes each partition after the input offset
stored in the ``src`` header of the output's last committed record.

Long form (documented in docs/FAULTS.md)::

    .venv/bin/python tests/torture/crash_torture.py --kills 100 --records 100000

CI runs the short form through ``tests/torture/test_crash_torture.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make ``support`` importable

from support.broker import BrokerProcess, BrokerStartError
from support.topics import create_topic_confluent

INPUT, OUTPUT = "torture-in", "torture-out"
TXN_ID = "torture-copier"
SRC_HEADER = "src"
#: Every named fault point a copier's traffic reaches (see oncelog.storage.faults).
FAULT_POINTS = (
    "produce.after_append",
    "produce.after_fsync",
    "storage.append",
    "storage.fsync",
    "storage.roll",
    "storage.snapshot",
    "txn.after_prepare",
    "txn.after_first_marker",
    "txn.before_complete",
)
#: Small segments so that rolls (and the producer snapshots they write) happen under the copier's traffic.
BROKER_SETTINGS = {
    "log.segment.bytes": 32768,
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": 500,
    "log.flush.offset.checkpoint.interval.ms": 1000,
}
CLIENT_SETTINGS = {
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200,
    "retry.backoff.ms": 20,
    "retry.backoff.max.ms": 200,
    "socket.connection.setup.timeout.ms": 2000,
    "log_level": 0,
}
OP_TIMEOUT_S = 20.0
FAULT_WAIT_S = 20.0


def transform(value: bytes) -> bytes:
    """What the copier writes for an input value."""
    return b"copy:" + value[::-1]


def input_value(index: int) -> bytes:
    return b"record-%08d" % index


@dataclass
class Stats:
    kills: int = 0
    fault_kills: dict[str, int] = field(default_factory=dict)
    faults_not_reached: list[str] = field(default_factory=list)
    sessions: int = 0
    commits: int = 0
    failed_commits: int = 0
    copier_crashes: int = 0


class Copier:
    """The transactional copier; ``run`` it in a thread. ``allowed`` caps how many records it copies (raised by the
    chaos driver so that kills land while it is busy)."""

    def __init__(self, bootstrap: str, partitions: int, ends: dict[int, int], txn_records: int, stats: Stats) -> None:
        self.bootstrap = bootstrap
        self.partitions = partitions
        self.ends = ends
        self.total = sum(ends.values())
        self.txn_records = txn_records
        self.stats = stats
        self.positions: dict[int, int] = {}
        self.allowed = 0
        self.stop = threading.Event()
        #: Set by the driver: the copier "crashes" in the middle of its next transaction (records produced, no
        #: commit) and restarts from the output's committed state, as a restarted copier process would.
        self.crash_requested = threading.Event()
        self.error: BaseException | None = None
        self.last_failure = ""

    @property
    def copied(self) -> int:
        return sum(self.positions.values())

    @property
    def done(self) -> bool:
        return self.copied >= self.total

    def run(self) -> None:
        try:
            while not self.stop.is_set() and not self.done:
                try:
                    self._session()
                except (KafkaException, ConnectionError, TimeoutError, RuntimeError) as exc:
                    self.last_failure = repr(exc)
                    time.sleep(0.1)
        except BaseException as exc:  # surfaced by the driver
            self.error = exc

    def _session(self) -> None:
        self.stats.sessions += 1
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "transactional.id": TXN_ID,
                "transaction.timeout.ms": 10000,
                "message.timeout.ms": 10000,
                "linger.ms": 2,
                **CLIENT_SETTINGS,
            }
        )
        consumer: Consumer | None = None
        try:
            producer.init_transactions(OP_TIMEOUT_S)
            self.positions = resume_positions(self.bootstrap, self.partitions, self.txn_records)
            consumer = _consumer(self.bootstrap, read_committed=True)
            consumer.assign([TopicPartition(INPUT, p, self.positions[p]) for p in range(self.partitions)])
            while not self.stop.is_set() and not self.done:
                if self.copied >= self.allowed:
                    time.sleep(0.01)
                    continue
                messages = consumer.consume(num_messages=self.txn_records, timeout=0.2)
                for m in messages:
                    if m.error() is not None:
                        raise KafkaException(m.error())
                if not messages:
                    continue
                producer.begin_transaction()
                for m in messages:
                    producer.produce(
                        OUTPUT,
                        key=m.key(),
                        value=transform(m.value()),
                        partition=m.partition(),
                        headers=[(SRC_HEADER, b"%d" % m.offset())],
                    )
                if self.crash_requested.is_set():
                    self.crash_requested.clear()
                    producer.flush(OP_TIMEOUT_S)
                    self.stats.copier_crashes += 1
                    raise RuntimeError("copier crash requested")
                try:
                    producer.commit_transaction(OP_TIMEOUT_S)
                except KafkaException:
                    self.stats.failed_commits += 1
                    raise
                self.stats.commits += 1
                for m in messages:
                    self.positions[m.partition()] = m.offset() + 1
        finally:
            if consumer is not None:
                with contextlib.suppress(Exception):
                    consumer.close()
            with contextlib.suppress(Exception):
                producer.purge()
            del producer


def _consumer(bootstrap: str, *, read_committed: bool, eof: bool = False) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "torture-unused",  # required by the client; no group APIs are used
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "isolation.level": "read_committed" if read_committed else "read_uncommitted",
            "enable.partition.eof": eof,
            "auto.offset.reset": "error",
            **CLIENT_SETTINGS,
        }
    )


def read_to_end(
    bootstrap: str, topic: str, starts: dict[int, int], *, read_committed: bool = True, deadline_s: float = 60.0
) -> dict[int, list]:
    """Every record from ``starts[p]`` to the end (the LSO under read_committed) of each partition."""
    consumer = _consumer(bootstrap, read_committed=read_committed, eof=True)
    out: dict[int, list] = {p: [] for p in starts}
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING if o == 0 else o) for p, o in starts.items()])
        pending = set(starts)
        end = time.monotonic() + deadline_s
        while pending:
            if time.monotonic() > end:
                raise TimeoutError(f"reading {topic} did not reach the end of partitions {sorted(pending)}")
            for m in consumer.consume(num_messages=5000, timeout=0.5):
                err = m.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        pending.discard(m.partition())
                        continue
                    raise KafkaException(err)
                out[m.partition()].append(m)
    finally:
        consumer.close()
    return out


def _src(message) -> int:
    return int(dict(message.headers() or ())[SRC_HEADER])


def resume_positions(bootstrap: str, partitions: int, txn_records: int) -> dict[int, int]:
    """Next input offset per partition: one past the ``src`` of the output's last committed record.

    Reads a window at the end of each partition, doubling it while it holds no committed record.
    """
    probe = _consumer(bootstrap, read_committed=True)
    try:
        highs = {
            p: probe.get_watermark_offsets(TopicPartition(OUTPUT, p), timeout=OP_TIMEOUT_S)[1]
            for p in range(partitions)
        }
    finally:
        probe.close()
    positions: dict[int, int] = {}
    window = 2 * txn_records + 2
    todo = set(range(partitions))
    while todo:
        starts = {p: max(0, highs[p] - window) for p in todo}
        tails = read_to_end(bootstrap, OUTPUT, starts)
        for p in list(todo):
            if tails[p]:
                positions[p] = _src(tails[p][-1]) + 1
                todo.discard(p)
            elif starts[p] == 0:
                positions[p] = 0
                todo.discard(p)
        window *= 4
    return positions


class Chaos:
    """Kills and restarts the broker; fault-point kills restart it with ``ONCELOG_FAULTS`` and wait for the crash."""

    def __init__(self, broker: BrokerProcess, copier: Copier, stats: Stats, log: Callable[[str], None]) -> None:
        self.broker = broker
        self.copier = copier
        self.stats = stats
        self.log = log

    def _start(self, env: dict[str, str]) -> bool:
        """Start the broker; False when a fault point killed it before it listened."""
        self.broker.env = env
        try:
            self.broker.start()
        except BrokerStartError:
            if not env:
                raise
            return False
        return True

    def random_kill(self, rng: random.Random) -> None:
        if rng.random() < 0.5:
            self.copier.crash_requested.set()
        time.sleep(rng.uniform(0, 0.3))
        self.broker.kill()
        self.stats.kills += 1
        self._start({})

    def fault_kill(self, point: str, step: int) -> None:
        self.broker.kill()
        self.stats.kills += 1
        if self._start({"ONCELOG_FAULTS": point}):
            end = time.monotonic() + FAULT_WAIT_S
            while self.broker.proc is not None and self.broker.proc.poll() is None:
                if time.monotonic() > end:
                    self.stats.faults_not_reached.append(point)
                    self.log(f"fault point {point} not reached in {FAULT_WAIT_S}s")
                    self.broker.kill()
                    break
                if self.copier.done:
                    self.stats.faults_not_reached.append(point)
                    self.broker.kill()
                    break
                self.copier.allowed = min(self.copier.total, max(self.copier.allowed, self.copier.copied + step))
                time.sleep(0.05)
            else:
                self.broker.wait_exit(5)
                self.stats.fault_kills[point] = self.stats.fault_kills.get(point, 0) + 1
        else:
            self.stats.fault_kills[point] = self.stats.fault_kills.get(point, 0) + 1
        self.broker.kill()
        self._start({})


@dataclass
class Result:
    stats: Stats
    records: int
    committed: int
    aborted_visible_uncommitted: int
    seconds: float


def torture(
    data_dir: Path,
    *,
    records: int,
    kills: int,
    partitions: int = 3,
    txn_records: int = 100,
    seed: int = 0,
    fault_points: tuple[str, ...] = FAULT_POINTS,
    log: Callable[[str], None] = print,
) -> Result:
    """Run the whole torture; raises AssertionError on any lost, duplicated, aborted or wrong record."""
    rng = random.Random(seed)
    started = time.monotonic()
    stats = Stats()
    broker = BrokerProcess(data_dir, settings=BROKER_SETTINGS)
    broker.start()
    try:
        create_topic_confluent(broker.bootstrap, INPUT, partitions)
        create_topic_confluent(broker.bootstrap, OUTPUT, partitions)
        produce_input(broker.bootstrap, records, partitions)
        ends = {p: len(range(p, records, partitions)) for p in range(partitions)}
        copier = Copier(broker.bootstrap, partitions, ends, txn_records, stats)
        chaos = Chaos(broker, copier, stats, log)
        thread = threading.Thread(target=copier.run, name="copier", daemon=True)
        thread.start()
        thresholds = sorted(rng.uniform(0.02, 0.9) * records for _ in range(kills))
        points = list(fault_points)
        rng.shuffle(points)
        try:
            for i, threshold in enumerate(thresholds):
                copier.allowed = int(threshold) + rng.randrange(1, 3 * txn_records)
                _wait(
                    lambda t=threshold: copier.copied >= t or copier.error is not None or not thread.is_alive(),
                    120,
                    f"copier stalled before kill {i} at {copier.copied}: {copier.last_failure}",
                )
                if copier.error is not None:
                    raise copier.error
                kill_started = time.monotonic()
                if points and i % 2 == 0:
                    point = points[(i // 2) % len(points)]
                    log(f"kill {i + 1}/{kills}: at fault point {point} (copied {copier.copied}/{records})")
                    chaos.fault_kill(point, txn_records)
                else:
                    log(f"kill {i + 1}/{kills}: SIGKILL at a random moment (copied {copier.copied}/{records})")
                    chaos.random_kill(rng)
                log(f"    took {time.monotonic() - kill_started:.1f}s")
            copier.allowed = records
            _wait(
                lambda: copier.done or copier.error is not None or not thread.is_alive(),
                300,
                f"copier did not finish: {copier.copied}/{records}: {copier.last_failure}",
            )
            if copier.error is not None:
                raise copier.error
        finally:
            copier.stop.set()
            thread.join(60)
        committed, aborted = verify(broker.bootstrap, records, partitions)
    finally:
        broker.close()
    return Result(stats, records, committed, aborted, time.monotonic() - started)


def _wait(condition: Callable[[], bool], timeout_s: float, message: str) -> None:
    end = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > end:
            raise TimeoutError(message)
        time.sleep(0.01)


def produce_input(bootstrap: str, records: int, partitions: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 5})
    errors: list[str] = []

    def report(err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            errors.append(str(err))

    for i in range(records):
        producer.produce(INPUT, key=b"k%d" % i, value=input_value(i), partition=i % partitions, on_delivery=report)
        if i % 5000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0 and not errors, errors[:3]


def verify(bootstrap: str, records: int, partitions: int) -> tuple[int, int]:
    """Output (read_committed) == transform(input), per partition in order; returns (committed records, records of
    aborted transactions that only read_uncommitted sees)."""
    starts = dict.fromkeys(range(partitions), 0)
    source = read_to_end(bootstrap, INPUT, starts)
    assert sum(len(v) for v in source.values()) == records, "input records lost"
    committed = read_to_end(bootstrap, OUTPUT, starts)
    for p in range(partitions):
        got = [(_src(m), m.key(), m.value()) for m in committed[p]]
        want = [(m.offset(), m.key(), transform(m.value())) for m in source[p]]
        if got != want:
            srcs = [g[0] for g in got]
            dups = len(srcs) - len(set(srcs))
            missing = sorted({w[0] for w in want} - set(srcs))[:10]
            raise AssertionError(
                f"partition {p}: {len(got)} records for {len(want)} inputs; {dups} duplicates; "
                f"first missing {missing}; first mismatch at "
                f"{next((i for i, (a, b) in enumerate(zip(got, want, strict=False)) if a != b), None)}"
            )
    everything = read_to_end(bootstrap, OUTPUT, starts, read_committed=False)
    total = sum(len(v) for v in everything.values())
    return sum(len(v) for v in committed.values()), total - records


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--txn-records", type=int, default=200, help="records per copier transaction")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--data-dir", type=Path, default=None, help="default: a temporary directory")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    import tempfile

    with tempfile.TemporaryDirectory(prefix="oncelog-torture-") as tmp:
        data_dir = args.data_dir or Path(tmp) / "data"
        print(f"seed {seed}, data dir {data_dir}")
        result = torture(
            data_dir,
            records=args.records,
            kills=args.kills,
            partitions=args.partitions,
            txn_records=args.txn_records,
            seed=seed,
        )
    s = result.stats
    print(
        f"OK: {result.records} records copied exactly once through {s.kills} SIGKILLs "
        f"({sum(s.fault_kills.values())} at fault points: {s.fault_kills}; not reached: {s.faults_not_reached}); "
        f"{s.commits} commits, {s.failed_commits} failed commits, {s.sessions} copier sessions "
        f"({s.copier_crashes} copier crashes mid-transaction); "
        f"{result.aborted_visible_uncommitted} aborted records visible only to read_uncommitted; "
        f"{result.seconds:.1f}s"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
