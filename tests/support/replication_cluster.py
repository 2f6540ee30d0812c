"""Several BrokerNodes in one trio test, replicating to each other with partition states applied by hand (no etcd):
each node has its own data dir and loopback port, finds the others through ``endpoint_of`` and changes ISRs through
one shared ``InMemoryIsrUpdater``. Topics are created on every node with its single-node metadata; ``apply`` hands
every running node the partition's state, as the controller's watch will."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import trio
from oncelog.broker.clock import now_ms
from oncelog.broker.config import BrokerConfig
from oncelog.broker.controller.partition_change import PartitionState
from oncelog.broker.listeners import Endpoint
from oncelog.broker.node import BrokerNode
from oncelog.protocol import ErrorCode

from .isr_updater import InMemoryIsrUpdater

HOST = "127.0.0.1"


class Member:
    """One broker of the cluster; ``node`` is None while it is stopped."""

    def __init__(self, node_id: int, data_dir: Path) -> None:
        self.node_id = node_id
        self.data_dir = data_dir
        self.node: BrokerNode | None = None
        self.port: int | None = None
        self._scope: trio.CancelScope | None = None
        self._finished: trio.Event | None = None


class ReplicationCluster:
    """``await cluster.start(1)`` ... ``await cluster.stop(1)``; every member stops with the test's nursery."""

    def __init__(
        self, nursery: trio.Nursery, root: Path, node_ids: Iterable[int], properties: Mapping[str, str] | None = None
    ) -> None:
        self._nursery = nursery
        self.properties = dict(properties or {})
        self.members = {node_id: Member(node_id, root / f"broker-{node_id}") for node_id in node_ids}
        self.updater = InMemoryIsrUpdater(self.members)
        #: Topics created, with their configs, so a restarted member gets them too.
        self.topics: dict[str, tuple[int, dict[str, str]]] = {}

    def node(self, node_id: int) -> BrokerNode:
        node = self.members[node_id].node
        assert node is not None, f"broker {node_id} is stopped"
        return node

    def endpoint_of(self, node_id: int) -> Endpoint | None:
        member = self.members.get(node_id)
        if member is None or member.node is None or member.port is None:
            return None
        return Endpoint(HOST, member.port)

    async def start(self, node_id: int) -> BrokerNode:
        """Start (or restart, same data dir and port) a member, then hand it every partition state."""
        member = self.members[node_id]
        values = {
            "log.dirs": str(member.data_dir),
            "listeners": f"PLAINTEXT://{HOST}:{member.port or 0}",
            "node.id": str(node_id),
            **self.properties,
        }
        node = BrokerNode(BrokerConfig.from_sources(values), endpoint_of=self.endpoint_of, isr_updater=self.updater)
        scope = trio.CancelScope()
        finished = trio.Event()

        async def run(task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                with scope:
                    await node.run(task_status=task_status)
            finally:
                finished.set()

        member.port = await self._nursery.start(run)
        member.node, member._scope, member._finished = node, scope, finished
        for name, (partitions, configs) in self.topics.items():
            if node.metadata.get(name) is None:
                await self._create_on(node, name, partitions, configs)
        for (topic, partition), state in self.updater.states.items():
            node.replicas.apply_partition_state(topic, partition, state, now_ms=now_ms())
        self.updater.live.add(node_id)
        return node

    async def stop(self, node_id: int) -> None:
        """Stop a member cleanly (its logs closed) and wait until it has."""
        member = self.members[node_id]
        assert member._scope is not None and member._finished is not None
        self.updater.live.discard(node_id)
        member._scope.cancel()
        await member._finished.wait()
        member.node = None

    async def stop_all(self) -> None:
        for node_id, member in self.members.items():
            if member.node is not None:
                await self.stop(node_id)

    @staticmethod
    async def _create_on(node: BrokerNode, name: str, partitions: int, configs: Mapping[str, str]) -> None:
        outcome = await node.topics.create(name, partitions, 1, configs)
        assert outcome.error == ErrorCode.NONE, outcome

    async def create_topic(self, name: str, partitions: int = 1, configs: Mapping[str, str] | None = None) -> None:
        """The topic on every running member (each with its own single-node metadata)."""
        self.topics[name] = (partitions, dict(configs or {}))
        for member in self.members.values():
            if member.node is not None:
                await self._create_on(member.node, name, partitions, configs or {})

    def apply(self, topic: str, partition: int, state: PartitionState, *, order: Iterable[int] | None = None) -> None:
        """Make ``state`` the controller's and hand it to every running member (in ``order`` if given)."""
        self.updater.set(topic, partition, state)
        for node_id in order or self.members:
            member = self.members[node_id]
            if member.node is not None:
                member.node.replicas.apply_partition_state(topic, partition, state, now_ms=now_ms())

    def state(self, topic: str, partition: int) -> PartitionState:
        return self.updater.states[(topic, partition)]
