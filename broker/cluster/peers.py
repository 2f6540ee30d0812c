"""Connections from this broker to the other brokers of the cluster, for the requests brokers send each other
(WriteTxnMarkers today). One connection per broker, opened on first use over the broker's registered endpoint on
the inter-broker listener, replaced after it breaks and when the broker registers a new address."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import structlog
import trio
from oncelog.client.connection import BrokerConnection
from oncelog.client.errors import KafkaError
from oncelog.protocol import ApiKey

log = structlog.get_logger(__name__)

#: Kafka's ``request.timeout.ms`` for inter-broker requests (``controller.socket.timeout.ms`` is the same 30 s).
INTER_BROKER_REQUEST_TIMEOUT_MS = 30000


class PeerUnavailable(Exception):
    """The broker is not registered, or cannot be reached now."""


class PeerConnections:
    """Run ``run`` for the broker's lifetime; then ``request`` reaches any registered broker."""

    def __init__(self, node_id: int, address_of: Callable[[int], tuple[str, int] | None]) -> None:
        """``address_of(broker_id)`` is the broker's (host, port) on the inter-broker listener, or None."""
        self._node_id = node_id
        self._address_of = address_of
        self._connections: dict[int, BrokerConnection] = {}
        self._opening: dict[int, trio.Lock] = {}
        self._nursery: trio.Nursery | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None
                with trio.CancelScope(shield=True):
                    for connection in list(self._connections.values()):
                        await connection.aclose()

    async def request(self, broker_id: int, key: ApiKey, body: Mapping[str, Any]) -> Any:
        """Send one request to ``broker_id`` and return its decoded response; PeerUnavailable when it cannot be
        sent or answered (the connection is dropped, the next request opens a new one)."""
        connection = await self._connection(broker_id)
        try:
            return await connection.request(key, body)
        except KafkaError as exc:
            self._connections.pop(broker_id, None)
            await connection.aclose()
            raise PeerUnavailable(f"broker {broker_id}: {exc}") from exc

    async def _connection(self, broker_id: int) -> BrokerConnection:
        lock = self._opening.setdefault(broker_id, trio.Lock())
        async with lock:
            address = self._address_of(broker_id)
            if address is None:
                raise PeerUnavailable(f"broker {broker_id} is not registered")
            current = self._connections.get(broker_id)
            if current is not None and current.connected and (current.host, current.port) == address:
                return current
            if current is not None:
                await current.aclose()
            if self._nursery is None:
                raise PeerUnavailable("inter-broker connections are not running")
            connection = BrokerConnection(
                *address,
                node_id=broker_id,
                client_id=f"broker-{self._node_id}",
                request_timeout_ms=INTER_BROKER_REQUEST_TIMEOUT_MS,
            )
            try:
                await connection.open(self._nursery)
            except KafkaError as exc:
                raise PeerUnavailable(f"broker {broker_id}: {exc}") from exc
            self._connections[broker_id] = connection
            return connection
