"""Apache Kafka itself as a peer: a single-node KRaft broker (the jars ``java/pom.xml`` pins) on free loopback ports.

Guaranteed: ``start()`` formats a fresh temporary log dir (``kafka.tools.StorageTool format``, what
``kafka-storage.sh format`` runs), starts ``kafka.Kafka`` on a generated ``server.properties`` and returns only once
the broker logged that it started and its PLAINTEXT port accepts connections, or raises ``KafkaStartError`` with its
log tail; ``stop()`` (SIGTERM, then SIGKILL after ``STOP_DEADLINE_S``) leaves no process and no directory behind.

Durability is explicit, matched to the oncelog run it is compared with: ``fsync=True`` sets
``log.flush.interval.messages=1`` (Kafka fsyncs the segment after every append before acknowledging, as oncelog does
by default), ``fsync=False`` keeps Kafka's default (Long.MAX_VALUE: page cache only, flushed by the OS), as oncelog's
page-cache mode.

A node of a cluster (``kafka_cluster.KafkaCluster``) is a ``KafkaPeer`` too: the cluster allocates every node's ports
first (the quorum names every controller), formats each with one cluster id and its own ``node.id``, spawns all, then
waits for all (one node alone cannot elect a controller, so no node's start can wait before the others are spawned).
"""

from __future__ import annotations

import base64
import contextlib
import signal
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from . import kafka_jars
from .broker import process_cpu_seconds
from .ports import can_connect, free_port

HOST = "127.0.0.1"
START_DEADLINE_S = 90.0  # a JVM on a loaded two-core machine
STOP_DEADLINE_S = 30.0
#: The line kafka.Kafka (KafkaRaftServer) logs once broker and controller are up.
STARTED_LINE = "Kafka Server started"
#: The broker JVM's heap (kafka-server-start.sh defaults to 1 GiB); smaller keeps a shared CI machine's memory free.
HEAP = ("-Xms512m", "-Xmx512m")
#: Settings every node gets, alone or in a cluster: broker and controller in one process, no rebalance delay (as
#: tests expect).
BASE_PROPERTIES: Mapping[str, str] = {
    "process.roles": "broker,controller",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "group.initial.rebalance.delay.ms": "0",
}
#: Settings a peer alone gets: every internal topic with one replica and one partition.
SINGLE_NODE_PROPERTIES: Mapping[str, str] = {
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
}
#: ``log.flush.interval.messages`` for fsync-per-append (oncelog's default durability).
FSYNC_EVERY_APPEND = {"log.flush.interval.messages": "1"}


class KafkaStartError(RuntimeError):
    """Kafka exited or did not start within ``START_DEADLINE_S``; the message holds its log tail."""


def cluster_id() -> str:
    """A random cluster id in Kafka's form (a UUID, URL-safe base64 without padding). Never one starting with '-',
    as Kafka's Uuid.randomUuid: ``kafka-storage format -t -...`` would take it for an option (1 id in 64)."""
    while True:
        found = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        if not found.startswith("-"):
            return found


class KafkaPeer:
    """One KRaft Kafka node (broker and controller) on ``127.0.0.1:port`` with a temporary log dir: alone, as
    ``start()`` makes it, or one node of a ``KafkaCluster`` (``allocate``, ``format``, ``spawn``, ``wait_started``)."""

    def __init__(self, *, fsync: bool, settings: Mapping[str, str] | None = None, node_id: int = 1) -> None:
        self.fsync = fsync
        self.settings = dict(settings or {})
        self.node_id = node_id
        self.port = 0
        self.controller_port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._since = 0  # where the log of the latest spawn begins

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def voter(self) -> str:
        """This node's entry in ``controller.quorum.voters`` (``id@host:port``); after ``allocate()``."""
        return f"{self.node_id}@{HOST}:{self.controller_port}"

    @property
    def durability(self) -> str:
        """The durability in words, for reports."""
        return "fsync per append" if self.fsync else "page cache"

    def _root(self) -> Path:
        assert self._tmp is not None, "not allocated"
        return Path(self._tmp.name)

    def _log_path(self) -> Path:
        return self._root() / "kafka.log"

    def log_tail(self, limit: int = 6000) -> str:
        with contextlib.suppress(OSError, AssertionError):
            return self._log_path().read_text(errors="replace")[-limit:]
        return ""

    def _log_since(self, offset: int) -> str:
        with self._log_path().open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def properties(self, voters: str, role: Mapping[str, str]) -> str:
        """``server.properties``: every node's settings, then ``role``'s (alone or in a cluster), this node's id,
        listeners, quorum and log dir, the durability, and last the caller's ``settings`` (which win)."""
        props = {
            **BASE_PROPERTIES,
            **role,
            "node.id": str(self.node_id),
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{self.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "controller.quorum.voters": voters,
            "log.dirs": str(self._root() / "logs"),
            **(FSYNC_EVERY_APPEND if self.fsync else {}),
            **self.settings,
        }
        return "".join(f"{key}={value}\n" for key, value in props.items())

    def allocate(self) -> None:
        """Make the temporary dir and pick the PLAINTEXT and CONTROLLER ports."""
        self._tmp = tempfile.TemporaryDirectory(prefix="oncelog-kafka-peer-")
        self.port = free_port()
        self.controller_port = free_port()

    def format(self, cluster: str, properties: str) -> None:
        """Write ``properties`` as ``server.properties`` and format the log dir with cluster id ``cluster``
        (``kafka-storage format``); ``KafkaStartError`` with the log tail when Kafka refuses. After ``allocate()``."""
        config = self._root() / "server.properties"
        config.write_text(properties)
        java = [kafka_jars.java(), *HEAP, "-cp", kafka_jars.classpath()]
        with self._log_path().open("ab") as log:
            formatted = subprocess.run(
                [*java, "kafka.tools.StorageTool", "format", "-t", cluster, "-c", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                check=False,
            )
        if formatted.returncode != 0:
            raise KafkaStartError(f"kafka-storage format failed:\n{self.log_tail()}")

    def spawn(self) -> None:
        """Start the node's JVM on the formatted log dir; returns at once (``wait_started`` waits)."""
        config = self._root() / "server.properties"
        with self._log_path().open("ab") as log:
            self._since = log.tell()  # this start's STARTED_LINE is after what earlier starts wrote
            self.proc = subprocess.Popen(
                [kafka_jars.java(), *HEAP, "-cp", kafka_jars.classpath(), "kafka.Kafka", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_started(self, deadline: float) -> None:
        """Wait until the node logged its start and its PLAINTEXT port accepts; ``KafkaStartError`` with the log tail
        when it exits or ``deadline`` (``time.monotonic()``) passes. The caller stops it."""
        assert self.proc is not None, "not spawned"
        while not (STARTED_LINE in self._log_since(self._since) and can_connect(HOST, self.port)):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise KafkaStartError(f"Kafka did not start on {self.bootstrap}:\n{self.log_tail()}")
            time.sleep(0.2)

    def start(self) -> KafkaPeer:
        """Format a fresh log dir, start the broker, wait until it serves (or raise ``KafkaStartError``)."""
        self.allocate()
        try:
            self.format(cluster_id(), self.properties(self.voter, SINGLE_NODE_PROPERTIES))
            return self._launch()
        except BaseException:
            self.stop()
            raise

    def _launch(self) -> KafkaPeer:
        """Spawn the JVM and wait until it serves (``KafkaStartError`` after ``START_DEADLINE_S``)."""
        self.spawn()
        self.wait_started(time.monotonic() + START_DEADLINE_S)
        return self

    def restart(self, *, hard: bool = False) -> KafkaPeer:
        """Stop the broker JVM (SIGKILL when ``hard``, else SIGTERM) and start it again on the same log dir and
        ports, so that clients reconnect to the same address."""
        assert self.proc is not None and self._tmp is not None, "not started"
        if hard:
            self.proc.kill()
        else:
            self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(STOP_DEADLINE_S)
        try:
            return self._launch()
        except KafkaStartError:
            self.stop()
            raise

    def cpu_seconds(self) -> float:
        """CPU seconds the broker JVM has used so far (every thread)."""
        assert self.proc is not None
        return process_cpu_seconds(self.proc.pid)

    def stop(self, *, hard: bool = False) -> None:
        """SIGTERM and wait (SIGKILL after ``STOP_DEADLINE_S``; at once when ``hard``); remove the log dir."""
        if self.proc is not None and self.proc.poll() is None:
            if hard:
                self.proc.kill()
            else:
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> KafkaPeer:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
