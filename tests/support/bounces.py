"""Kafka's ``transactions_test.py`` on a three-broker cluster: transactional copiers (``copier.py``, one per client,
hundreds of records per transaction, send_offsets_to_transaction) copy input topics (replication factor 3,
min.insync.replicas 2, seeded by an idempotent producer) to output topics while brokers are bounced, hard (SIGKILL,
restart) and clean (SIGTERM, restart), in rolling order, and copiers are SIGKILLed and restarted; a read_committed
consumer reads the outputs meanwhile.

A restarted broker's first Metadata answer must name the cluster's id, itself and another broker.

``run_bounces`` returns, per client, the transformed input and the final output (compared by
``copier_harness.exactly_once_problems``) and the concurrent reader's problems: a record it read that is not at
that offset of the final output (an aborted or lost record) or a record read at two offsets.
"""

from __future__ import annotations

import collections
import random
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .cluster import Cluster
from .copier import SRC_HEADER
from .copier_harness import COPIER, PARTITIONS, ChaosResult, CopierProcess, Row, produce_input, read_committed

#: A copier that commits nothing for this long is treated as crashed (killed and restarted): kafka-python's
#: send_offsets_to_transaction has no timeout and waits out request.timeout.ms (30 s) on a killed coordinator.
COPIER_STALL_S = 10.0
#: Copier restarts (after its own non-zero exits or stalls) tolerated per client.
MAX_RESTARTS = 12
#: How long the whole copy may take after the last bounce.
FINISH_DEADLINE_S = 120.0


@dataclass
class CopyJob:
    """One client's copier, restarted as often as it dies."""

    client: str
    cluster: Cluster
    log_dir: Path
    batch: int
    input_rows: list[Row] = field(default_factory=list)
    copier: CopierProcess | None = None
    starts: int = 0
    restarts: int = 0
    killed: int = 0
    stalls: int = 0
    done: bool = False
    _progress: tuple[int, float] = (0, 0.0)

    @property
    def input(self) -> str:
        return f"{self.client}-in"

    @property
    def output(self) -> str:
        return f"{self.client}-out"

    def start(self, idle_s: float = 3.0) -> CopierProcess:
        self.starts += 1
        argv = [sys.executable, str(COPIER), "--client", self.client, "--bootstrap", self.cluster.bootstrap]
        argv += ["--group", f"{self.client}-group", "--input", self.input, "--output", self.output]
        argv += ["--transactional-id", f"{self.client}-txn", "--instance-id", f"{self.client}-copier"]
        argv += ["--batch", str(self.batch), "--idle-s", str(idle_s)]
        self.copier = CopierProcess(argv, self.log_dir / f"{self.client}-copier-{self.starts}.log")
        self._progress = (0, time.monotonic())
        return self.copier

    def kill(self) -> None:
        """A copier bounce: SIGKILL mid-run and start again."""
        if self.copier is not None and self.copier.poll() is None:
            self.copier.kill()
            self.killed += 1
            self.start()

    def supervise(self) -> None:
        """Mark done on a clean exit; restart after a failure or a stall."""
        copier = self.copier
        if self.done or copier is None:
            return
        code = copier.poll()
        commits = copier.commits()
        if code is None:
            if commits != self._progress[0]:
                self._progress = (commits, time.monotonic())
            elif time.monotonic() - self._progress[1] > COPIER_STALL_S:
                copier.proc.send_signal(signal.SIGUSR1)  # its threads' stacks go to its log
                time.sleep(0.5)
                copier.kill()
                self.stalls += 1
                code = -9
        if code is None:
            return
        copier.wait(5)
        if code == 0:
            self.done = True
            return
        self.restarts += 1
        assert self.restarts <= MAX_RESTARTS, f"{self.client} copier failed {self.restarts} times:\n{self.log_tail()}"
        self.start()

    def commits(self) -> int:
        return self.copier.commits() if self.copier is not None else 0

    def log_tail(self, limit: int = 3000) -> str:
        path = self.log_dir / f"{self.client}-copier-{self.starts}.log"
        return path.read_bytes()[-limit:].decode(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        if self.copier is not None and self.copier.poll() is None:
            self.copier.kill()


class OutputReader(threading.Thread):
    """read_committed over every output partition while the copy runs; (topic, partition, offset) -> src header."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        super().__init__(daemon=True, name="output-reader")
        self.bootstrap, self.topics = bootstrap, topics
        self.seen: list[tuple[str, int, int, bytes | None]] = []
        self.stopping = threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            consumer = Consumer(
                {
                    "bootstrap.servers": self.bootstrap,
                    "group.id": "bounce-reader-unused",
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                }
            )
            try:
                consumer.assign(
                    [TopicPartition(t, p, OFFSET_BEGINNING) for t in self.topics for p in range(PARTITIONS)]
                )
                while not self.stopping.is_set():
                    for m in consumer.consume(num_messages=1000, timeout=0.2):
                        if m.error() is None:
                            src = dict(m.headers() or ()).get(SRC_HEADER)
                            self.seen.append((m.topic(), m.partition(), m.offset(), src))
                        elif m.error().fatal():
                            raise RuntimeError(str(m.error()))
            finally:
                consumer.close()
        except BaseException as exc:
            self.error = exc

    def problems(self, final: dict[str, list[tuple[int, int, bytes | None]]]) -> list[str]:
        """What it read against the final output of each topic ((partition, offset, src) rows)."""
        at = {(topic, p, o): src for topic, rows in final.items() for p, o, src in rows}
        problems = [f"reader failed: {self.error!r}"] if self.error is not None else []
        offsets_of: dict[tuple[str, bytes | None], set[tuple[int, int]]] = collections.defaultdict(set)
        for topic, p, o, src in self.seen:
            offsets_of[(topic, src)].add((p, o))
            if at.get((topic, p, o), b"<missing>") != src:
                problems.append(f"read {src!r} at {topic}/{p}@{o}, final output has {at.get((topic, p, o))!r}")
        problems += [f"read {key} at {sorted(w)}" for key, w in offsets_of.items() if len(w) > 1]
        return problems


def read_with_offsets(bootstrap: str, topic: str) -> list[tuple[int, int, bytes | None]]:
    """(partition, offset, src header) of every record read_committed sees in ``topic``."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "bounce-final-unused",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    rows: list[tuple[int, int, bytes | None]] = []
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        at_end: set[int] = set()
        end = time.monotonic() + 60
        while len(at_end) < PARTITIONS and time.monotonic() < end:
            for m in consumer.consume(num_messages=5000, timeout=0.5):
                if m.error() is not None:
                    if m.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(m.partition())
                    continue
                at_end.discard(m.partition())
                rows.append((m.partition(), m.offset(), dict(m.headers() or ()).get(SRC_HEADER)))
    finally:
        consumer.close()
    return rows


@dataclass
class BounceResult:
    jobs: dict[str, CopyJob]
    results: dict[str, ChaosResult]
    reader_problems: list[str]
    bounces: list[str]

    def problems(self) -> list[str]:
        from .copier_harness import exactly_once_problems

        out = [f"{client}: {p}" for client, r in self.results.items() for p in exactly_once_problems(r)]
        return out + self.reader_problems

    def summary(self) -> str:
        jobs = ", ".join(
            f"{c}: {len(r.output_rows)}/{r.records} records, {self.jobs[c].starts} copier starts "
            f"({self.jobs[c].killed} killed, {self.jobs[c].restarts} restarted after failing, "
            f"{self.jobs[c].stalls} of them stalled)"
            for c, r in self.results.items()
        )
        return f"{len(self.bounces)} bounces ({', '.join(self.bounces)}); {jobs}"


def create_topics(cluster: Cluster, names: list[str]) -> None:
    admin = cluster.admin()
    new = [
        NewTopic(n, num_partitions=PARTITIONS, replication_factor=3, config={"min.insync.replicas": "2"}) for n in names
    ]
    for future in admin.create_topics(new).values():
        future.result(60)
    cluster.wait_for(lambda md: all(n in md.topics for n in names), "topics")


def in_sync(cluster: Cluster, topics: list[str], timeout_s: float = 60.0) -> None:
    cluster.wait_for(
        lambda md: (
            len(md.brokers) == len(cluster.brokers)
            and all(len(p.isrs) == 3 and p.leader > 0 for t in topics for p in md.topics[t].partitions.values())
        ),
        "every replica in sync",
        timeout_s=timeout_s,
    )


def run_bounces(
    cluster: Cluster,
    clients: list[str],
    *,
    records: int,
    bounces: list[str],
    log_dir: Path,
    batch: int = 300,
    seed: int = 0,
    log: Callable[[str], None] = lambda line: None,
) -> BounceResult:
    """``bounces``: "hard:N" / "clean:N" (broker N), "copier" (a random client's copier); each once every client
    has committed since the last one."""
    rng = random.Random(seed)
    jobs = {client: CopyJob(client, cluster, log_dir, batch) for client in clients}
    topics = [name for job in jobs.values() for name in (job.input, job.output)]
    create_topics(cluster, topics)
    for job in jobs.values():
        job.input_rows = produce_input(cluster.bootstrap, job.input, records)
    cluster_id = cluster.metadata().cluster_id
    first_answers: list[str] = []
    reader = OutputReader(cluster.bootstrap, [job.output for job in jobs.values()])
    reader.start()
    try:
        for job in jobs.values():
            job.start()
        for bounce in bounces:
            marks = {c: j.commits() for c, j in jobs.items()}
            end = time.monotonic() + 60
            while time.monotonic() < end and any(not j.done and j.commits() <= marks[c] for c, j in jobs.items()):
                for job in jobs.values():
                    job.supervise()
                time.sleep(0.05)
            log(f"bounce {bounce}: commits {marks}")
            if bounce == "copier":
                live = [j for j in jobs.values() if not j.done]
                if live:
                    rng.choice(live).kill()
                continue
            kind, node = bounce.split(":")
            broker = cluster.brokers[int(node)]
            broker.restart(hard=kind == "hard")
            # Its first answer (the port accepts as soon as it is bound) names the cluster and its brokers.
            # (Under load another broker's session may lapse meanwhile: itself and one more are enough.)
            md = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics(timeout=20)
            if md.cluster_id != cluster_id or int(node) not in md.brokers or len(md.brokers) < 2:
                first_answers.append(f"after {bounce}: cluster {md.cluster_id!r} brokers {sorted(md.brokers)}")
            in_sync(cluster, topics)
            log(f"in sync after {bounce}")
        log("bounces done")
        end = time.monotonic() + FINISH_DEADLINE_S
        while not all(j.done for j in jobs.values()):
            assert time.monotonic() < end, {c: j.log_tail() for c, j in jobs.items() if not j.done}
            for job in jobs.values():
                job.supervise()
            time.sleep(0.1)
        log("copied")
        lasts = {job.client: job.start(idle_s=1.5) for job in jobs.values()}  # one more each: nothing is left
        for client, last in lasts.items():
            assert last.wait(60) == 0, jobs[client].log_tail()
            assert "caught up after 0 records" in last.lines, (client, last.lines[-5:])
    finally:
        for job in jobs.values():
            job.stop()
        reader.stopping.set()
        reader.join(30)
    finals = {job.output: read_with_offsets(cluster.live_bootstrap(), job.output) for job in jobs.values()}
    results = {
        c: ChaosResult(records, j.input_rows, read_committed(cluster.live_bootstrap(), j.output, deadline_s=60))
        for c, j in jobs.items()
    }
    return BounceResult(jobs, results, first_answers + reader.problems(finals), bounces)
