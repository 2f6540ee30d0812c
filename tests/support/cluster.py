"""A cluster for tests: one etcd and N broker processes on loopback, each started the way README's cluster section
starts them (``oncelog broker --node-id N --data-dir D --listen ... --set etcd.connect=...``)."""

from __future__ import annotations

import contextlib
import tempfile
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from confluent_kafka.admin import AdminClient, ClusterMetadata

from support.broker import BrokerProcess, process_cpu_seconds
from support.etcd import EtcdProcess

#: Cluster tests use a short session so a killed broker leaves the cluster quickly (whole seconds: etcd leases).
SESSION_TIMEOUT_MS = 2000
#: oncelog's setting for Kafka's commit order: EndTxn answered once PrepareCommit is durable, markers afterwards.
KAFKA_COMMIT_ORDER = {"transaction.marker.wait.ms": 0}


class Cluster:
    """``size`` brokers with ids 1..size sharing one etcd; ``settings`` apply to every broker."""

    def __init__(self, size: int = 3, settings: Mapping[str, str | int] | None = None) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="oncelog-cluster-")
        self.etcd = EtcdProcess()
        base = {"broker.session.timeout.ms": SESSION_TIMEOUT_MS, **(settings or {})}
        self.brokers = {
            node_id: BrokerProcess(
                Path(self._tmp.name) / f"broker-{node_id}" / "data",
                settings={"node.id": node_id, "etcd.connect": self.etcd.endpoint + "/oncelog", **base},
            )
            for node_id in range(1, size + 1)
        }

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def start(self) -> Cluster:
        """Start etcd and every broker and wait until Metadata lists them all. If that fails, everything started is
        stopped (``with`` never calls ``__exit__`` when ``__enter__`` raises), and a broker missing from Metadata
        is explained by each broker's log tail, kept in the error (the logs go with the cluster's directory)."""
        try:
            self.etcd.start()
            for broker in self.brokers.values():
                broker.start()
            self.wait_for(lambda md: len(md.brokers) == len(self.brokers) and md.controller_id > 0, "every broker")
        except AssertionError as exc:
            tails = "".join(f"\n--- broker {n} ---\n{b.stderr_tail(4000)}" for n, b in self.brokers.items())
            self.close()
            raise AssertionError(f"{exc}{tails}") from None
        except BaseException:
            self.close()
            raise
        return self

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def metadata(self, via: int | None = None) -> ClusterMetadata:
        """Metadata as one broker (``via``, or whichever answers) reports it."""
        bootstrap = self.brokers[via].bootstrap if via is not None else self.live_bootstrap()
        return AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)

    def live_bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values() if b.proc is not None and b.proc.poll() is None)

    def wait_for(
        self, condition: Callable[[ClusterMetadata], bool], what: str, timeout_s: float = 30.0, via: int | None = None
    ) -> ClusterMetadata:
        """Poll Metadata until ``condition`` holds; AssertionError naming ``what`` after ``timeout_s``."""
        return wait_for_metadata(lambda: self.metadata(via), condition, what, timeout_s)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds used so far: ``brokers`` (summed over the running brokers and their fsync helpers) and ``etcd``
        (the metadata store, the part Kafka's KRaft controllers play inside its broker processes)."""
        brokers = sum(b.cpu_seconds() for b in self.brokers.values() if b.proc is not None and b.proc.poll() is None)
        assert self.etcd.proc is not None, "not started"
        return {"brokers": brokers, "etcd": process_cpu_seconds(self.etcd.proc.pid)}

    def close(self) -> None:
        """SIGKILL every broker (and wait until it is gone), stop etcd, delete every data dir. A test's cluster is
        thrown away: a graceful stop proves nothing here (``BrokerProcess.close`` ignores how it went) and the last
        brokers' controlled shutdowns wait out leaderships that cannot move, up to ~10 s a cluster. Controlled
        shutdown is tested where it is the subject (``test_membership.py``, ``test_replication.py``)."""
        for broker in self.brokers.values():
            with contextlib.suppress(RuntimeError):  # not gone in time: close() below tries once more
                broker.kill()
            broker.close()
        self.etcd.close()
        self._tmp.cleanup()

    def __enter__(self) -> Cluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()


def wait_for_metadata(
    metadata: Callable[[], ClusterMetadata], condition: Callable[[ClusterMetadata], bool], what: str, timeout_s: float
) -> ClusterMetadata:
    """Call ``metadata()`` every 0.2 s until ``condition`` holds of its answer (an exception counts as not yet: a
    broker between lives); AssertionError naming ``what`` and the last answer after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    last: ClusterMetadata | None = None
    while time.monotonic() < deadline:
        try:
            last = metadata()
            if condition(last):
                return last
        except Exception:  # a broker between lives; ask again
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}; last metadata: {_describe(last)}")


def _describe(metadata: ClusterMetadata | None) -> str:
    if metadata is None:
        return "none"
    topics = {
        name: {p: (pm.leader, pm.replicas, pm.isrs) for p, pm in topic.partitions.items()}
        for name, topic in metadata.topics.items()
    }
    return f"brokers={sorted(metadata.brokers)} controller={metadata.controller_id} topics={topics}"
