"""Apache Kafka itself as a cluster peer: three KRaft nodes (``kafka_peer.KafkaPeer``, the jars ``java/pom.xml`` pins)
on free loopback ports, for benchmarks beside oncelog's ``support.cluster.Cluster`` (C1 and C5 of ``bench/run.py``).

Each node is broker and controller (``process.roles=broker,controller``), ``node.id`` 1..size, all in one static
quorum (``controller.quorum.voters``), formatted with one cluster id. The internal topics get factor 3 as Kafka's
defaults and oncelog's cluster (``__transaction_state`` with ``min.isr`` 2). Durability as ``KafkaPeer``: ``fsync=True``
sets ``log.flush.interval.messages=1`` on every node, so leaders and followers fsync each append as oncelog's cluster
brokers do before acknowledging.

Each node's JVM has ``kafka_peer.HEAP`` (512 MiB). Guaranteed: ``start()`` returns only when every node logged its
start, accepts on its PLAINTEXT port, and Metadata lists every broker and a controller; else it raises
``KafkaStartError`` (with the failing node's log tail, or every node's when Metadata never lists them all) and leaves
no process and no directory.
``stop()`` SIGKILLs every node (a benchmark's cluster is thrown away, as ``Cluster.close`` does: the last nodes'
controlled shutdowns would wait for a quorum that is gone) and removes every log dir.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from types import TracebackType

from confluent_kafka.admin import AdminClient, ClusterMetadata

from .cluster import wait_for_metadata
from .kafka_peer import KafkaPeer, KafkaStartError, cluster_id

#: A JVM start of three nodes at once on a loaded two-core machine (one node alone: ``kafka_peer.START_DEADLINE_S``).
START_DEADLINE_S = 180.0


def replication_properties(size: int) -> dict[str, str]:
    """Settings of every node of a ``size``-node cluster: the internal topics with factor 3 (``min.isr`` 2), as
    Kafka's defaults, capped by ``size``; Kafka's default partition counts (50) as oncelog's cluster."""
    factor, min_isr = str(min(3, size)), str(min(2, size))
    return {
        "offsets.topic.replication.factor": factor,
        "transaction.state.log.replication.factor": factor,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": factor,
        "share.coordinator.state.topic.min.isr": min_isr,
    }


class KafkaCluster:
    """``size`` Kafka nodes with ids 1..size in one KRaft quorum; ``settings`` apply to every node."""

    def __init__(self, size: int = 3, *, fsync: bool = True, settings: Mapping[str, str] | None = None) -> None:
        self.size = size
        self.nodes = {
            node_id: KafkaPeer(fsync=fsync, settings=settings, node_id=node_id) for node_id in range(1, size + 1)
        }

    @property
    def bootstrap(self) -> str:
        return ",".join(node.bootstrap for node in self.nodes.values())

    @property
    def voters(self) -> str:
        """``controller.quorum.voters``: every node (after their ports are allocated)."""
        return ",".join(node.voter for node in self.nodes.values())

    def start(self) -> KafkaCluster:
        """Allocate and format every node, spawn all, wait until all serve (see the module's guarantee)."""
        try:
            for node in self.nodes.values():
                node.allocate()
            cluster = cluster_id()
            for node_id, node in self.nodes.items():
                node.format(cluster, self.properties(node_id))
            for node in self.nodes.values():
                node.spawn()
            deadline = time.monotonic() + START_DEADLINE_S
            for node in self.nodes.values():
                node.wait_started(deadline)
            self.wait_for(
                lambda md: len(md.brokers) == self.size and md.controller_id > 0,
                "every broker in Metadata",
                max(deadline - time.monotonic(), 10.0),
            )
        except KafkaStartError:
            self.stop()
            raise
        except AssertionError as error:
            tails = self.log_tails()
            self.stop()
            raise KafkaStartError(f"{error}\n{tails}") from error
        except BaseException:
            self.stop()
            raise
        return self

    def properties(self, node_id: int) -> str:
        """Node ``node_id``'s ``server.properties``: the whole quorum as voters, the internal topics replicated (after
        every node's ``allocate()``)."""
        return self.nodes[node_id].properties(self.voters, replication_properties(self.size))

    def log_tails(self, limit: int = 3000) -> str:
        return "\n".join(f"--- node {node_id}:\n{node.log_tail(limit)}" for node_id, node in self.nodes.items())

    def admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.bootstrap})

    def metadata(self) -> ClusterMetadata:
        return self.admin().list_topics(timeout=10)

    def wait_for(
        self, condition: Callable[[ClusterMetadata], bool], what: str, timeout_s: float = 30.0
    ) -> ClusterMetadata:
        """Poll Metadata until ``condition`` holds; AssertionError naming ``what`` after ``timeout_s``."""
        return wait_for_metadata(self.metadata, condition, what, timeout_s)

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds used so far by the nodes, summed (``brokers``: each node's broker and controller, every
        thread)."""
        return {"brokers": sum(node.cpu_seconds() for node in self.nodes.values())}

    def stop(self) -> None:
        """SIGKILL every node, wait until it is gone, remove its log dir."""
        for node in self.nodes.values():
            node.stop(hard=True)

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
