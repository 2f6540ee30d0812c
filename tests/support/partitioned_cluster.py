"""A cluster whose brokers reach each other and etcd only through ``netproxy`` proxies, so a test can partition it.

Each broker has two listeners: CLIENT (clients connect to it directly) and INTERNAL (``inter.broker.listener.name``,
advertised at the address of its proxy, so followers' fetches, WriteTxnMarkers and liveness probes all go through
the proxy). Its ``etcd.connect`` is a proxy of its own.
"""

from __future__ import annotations

from collections.abc import Mapping

from support.cluster import Cluster
from support.netproxy import HOST, Network
from support.ports import free_port


class PartitionedCluster(Cluster):
    """``Cluster`` with ``network``: ``network.isolate(node)`` / ``network.heal()``."""

    def __init__(self, size: int = 3, settings: Mapping[str, str | int] | None = None) -> None:
        super().__init__(size, settings)
        self.network = Network(
            lambda: {n: b.proc.pid for n, b in self.brokers.items() if b.proc is not None and b.proc.poll() is None}
        )
        for node, broker in self.brokers.items():
            internal = free_port()
            broker.ports = {"CLIENT": broker.port, "INTERNAL": internal}
            proxy = self.network.proxy_to_broker(node, internal)
            etcd = self.network.proxy_to_etcd(node, self.etcd.client_port)
            broker.settings.update(
                {
                    "listener.security.protocol.map": "CLIENT:PLAINTEXT,INTERNAL:PLAINTEXT",
                    "inter.broker.listener.name": "INTERNAL",
                    "advertised.listeners": f"CLIENT://{HOST}:{broker.port},INTERNAL://{HOST}:{proxy}",
                    "etcd.connect": f"{HOST}:{etcd}/oncelog",
                }
            )

    def close(self) -> None:
        """SIGKILL every broker (nothing is checked after; a broker alone stops slowly), then stop the rest."""
        try:
            self.network.heal()
            for broker in self.brokers.values():
                broker.kill()
            super().close()
        finally:
            self.network.close()
