"""The read view of the cluster that Metadata, DescribeCluster, FindCoordinator and the tools answer from: which
brokers there are and where clients reach them, who the controller is, and each partition's replicas, ISR, leader
and leader epoch.

Two implementations, one interface: ``SingleNodeView`` (no ``etcd.connect``: this broker is the whole cluster, the
leader and only replica of every partition whose log exists) and ``ImageView`` (the etcd metadata image this broker
follows).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from oncelog.broker.controller.partition_change import NO_LEADER, PartitionState
from oncelog.broker.etcd.image import MetadataImage


@dataclass(frozen=True)
class BrokerAddress:
    """Where clients of one listener reach a broker."""

    node_id: int
    host: str
    port: int
    rack: str | None = None


class ClusterView(Protocol):
    """The cluster as this broker knows it now."""

    def brokers(self, listener_name: str | None) -> list[BrokerAddress]:
        """The live brokers with an endpoint on ``listener_name`` (None: this broker's first listener), by id."""
        ...

    def controller_id(self) -> int:
        """The controller's broker id, or -1 between elections."""
        ...

    def partition(self, topic: str, index: int) -> PartitionState | None:
        """The partition's replication state, or None for a partition that does not exist (yet)."""
        ...


class SingleNodeView:
    """A single node: the only broker, the controller, and the only replica and leader of every partition."""

    def __init__(
        self,
        node_id: int,
        address: Callable[[str | None], tuple[str, int]],
        has_log: Callable[[str, int], bool],
        leader_epoch: Callable[[str, int], int],
    ) -> None:
        """``address(listener)`` is where this node is advertised; ``has_log`` says whether a partition's log exists
        (a partition whose creation is under way has no leader yet); ``leader_epoch`` gives its epoch."""
        self._node_id = node_id
        self._address = address
        self._has_log = has_log
        self._leader_epoch = leader_epoch

    def brokers(self, listener_name: str | None) -> list[BrokerAddress]:
        host, port = self._address(listener_name)
        return [BrokerAddress(self._node_id, host, port)]

    def controller_id(self) -> int:
        return self._node_id

    def partition(self, topic: str, index: int) -> PartitionState | None:
        if not self._has_log(topic, index):
            return None
        only = (self._node_id,)
        return PartitionState(only, only, self._node_id, self._leader_epoch(topic, index))


class ImageView:
    """The cluster as the etcd metadata image shows it."""

    def __init__(self, image: Callable[[], MetadataImage], default_listener: str) -> None:
        """``default_listener`` answers for requests whose listener is not named (this broker's first)."""
        self._image = image
        self._default_listener = default_listener

    def brokers(self, listener_name: str | None) -> list[BrokerAddress]:
        listener_name = listener_name or self._default_listener
        return [
            BrokerAddress(registration.broker_id, *registration.endpoints[listener_name], registration.rack)
            for _, registration in sorted(self._image().brokers.items())
            if listener_name in registration.endpoints
        ]

    def controller_id(self) -> int:
        controller = self._image().controller
        return controller.broker_id if controller is not None else NO_LEADER

    def partition(self, topic: str, index: int) -> PartitionState | None:
        return self._image().partition(topic, index)
