"""Apache Kafka itself as a peer: a single-node KRaft broker (the jars ``java/pom.xml`` pins) on free loopback ports.

Guaranteed: ``start()`` formats a fresh temporary log dir (``kafka.tools.StorageTool format``, what
``kafka-storage.sh format`` runs), starts ``kafka.Kafka`` on a generated ``server.properties`` and returns only once
the broker logged that it started and its PLAINTEXT port accepts connections, or raises ``KafkaStartError`` with its
log tail; ``stop()`` (SIGTERM, then SIGKILL after ``STOP_DEADLINE_S``) leaves no process and no directory behind.

Durability is explicit, matched to the oncelog run it is compared with: ``fsync=True`` sets
``log.flush.interval.messages=1`` (Kafka fsyncs the segment after every append before acknowledging, as oncelog does
by default), ``fsync=False`` keeps Kafka's default (Long.MAX_VALUE: page cache only, flushed by the OS), as oncelog's
page-cache mode.
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
#: Settings every peer gets: one node, every internal topic with one replica, no rebalance delay (as tests expect).
BASE_PROPERTIES: Mapping[str, str] = {
    "process.roles": "broker,controller",
    "node.id": "1",
    "controller.listener.names": "CONTROLLER",
    "inter.broker.listener.name": "PLAINTEXT",
    "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.replication.factor": "1",
    "transaction.state.log.min.isr": "1",
    "transaction.state.log.num.partitions": "1",
    "share.coordinator.state.topic.replication.factor": "1",
    "share.coordinator.state.topic.min.isr": "1",
    "group.initial.rebalance.delay.ms": "0",
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
    """One single-node KRaft Kafka broker on ``127.0.0.1:port`` with a temporary log dir."""

    def __init__(self, *, fsync: bool, settings: Mapping[str, str] | None = None) -> None:
        self.fsync = fsync
        self.settings = dict(settings or {})
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._tmp: tempfile.TemporaryDirectory[str] | None = None

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def durability(self) -> str:
        """The durability in words, for reports."""
        return "fsync per append" if self.fsync else "page cache"

    def _log_path(self) -> Path:
        assert self._tmp is not None
        return Path(self._tmp.name) / "kafka.log"

    def log_tail(self, limit: int = 6000) -> str:
        with contextlib.suppress(OSError):
            return self._log_path().read_text(errors="replace")[-limit:]
        return ""

    def _log_since(self, offset: int) -> str:
        with self._log_path().open("rb") as log:
            log.seek(offset)
            return log.read().decode(errors="replace")

    def _properties(self, root: Path, controller_port: int) -> str:
        props = {
            **BASE_PROPERTIES,
            "listeners": f"PLAINTEXT://{HOST}:{self.port},CONTROLLER://{HOST}:{controller_port}",
            "advertised.listeners": f"PLAINTEXT://{HOST}:{self.port}",
            "controller.quorum.voters": f"1@{HOST}:{controller_port}",
            "log.dirs": str(root / "logs"),
            **(FSYNC_EVERY_APPEND if self.fsync else {}),
            **self.settings,
        }
        return "".join(f"{key}={value}\n" for key, value in props.items())

    def start(self) -> KafkaPeer:
        """Format a fresh log dir, start the broker, wait until it serves (or raise ``KafkaStartError``)."""
        classpath = kafka_jars.classpath()
        self._tmp = tempfile.TemporaryDirectory(prefix="oncelog-kafka-peer-")
        root = Path(self._tmp.name)
        self.port = free_port()
        config = root / "server.properties"
        config.write_text(self._properties(root, free_port()))
        java = [kafka_jars.java(), *HEAP, "-cp", classpath]
        with self._log_path().open("ab") as log:
            formatted = subprocess.run(
                [*java, "kafka.tools.StorageTool", "format", "-t", cluster_id(), "-c", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                check=False,
            )
            if formatted.returncode != 0:
                tail = self.log_tail()
                self.stop()
                raise KafkaStartError(f"kafka-storage format failed:\n{tail}")
        return self._launch()

    def _launch(self) -> KafkaPeer:
        """Start the broker JVM on the formatted log dir and wait until it serves (or raise ``KafkaStartError``)."""
        assert self._tmp is not None
        config = Path(self._tmp.name) / "server.properties"
        with self._log_path().open("ab") as log:
            since = log.tell()  # this start's STARTED_LINE is after what earlier starts wrote
            self.proc = subprocess.Popen(
                [kafka_jars.java(), *HEAP, "-cp", kafka_jars.classpath(), "kafka.Kafka", str(config)],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        end = time.monotonic() + START_DEADLINE_S
        while not (STARTED_LINE in self._log_since(since) and can_connect(HOST, self.port)):
            if self.proc.poll() is not None or time.monotonic() > end:
                tail = self.log_tail()
                self.stop()
                raise KafkaStartError(f"Kafka did not start on {self.bootstrap}:\n{tail}")
            time.sleep(0.2)
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
        return self._launch()

    def cpu_seconds(self) -> float:
        """CPU seconds the broker JVM has used so far (every thread)."""
        assert self.proc is not None
        return process_cpu_seconds(self.proc.pid)

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL after ``STOP_DEADLINE_S``); remove the log dir."""
        if self.proc is not None and self.proc.poll() is None:
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
