"""A Cluster whose connections answer from a scripted handler instead of a socket.

The handler gets (api_key, version, request body dict) and returns a response body dict (or raises); the answer is
encoded with the real codecs and decoded by the real client path, so only the socket is fake.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from oncelog.client.cluster import Cluster
from oncelog.client.connection import BrokerConnection
from oncelog.client.versions import negotiate
from oncelog.protocol import SUPPORTED_VERSIONS, ApiKey, encode_response
from oncelog.protocol.headers import RequestHeader

Handler = Callable[[ApiKey, int, Mapping[str, Any]], dict[str, Any]]

NODE = 1
HOST, PORT = "fake", 1


def metadata_response(topics: Mapping[str, int]) -> dict[str, Any]:
    return {
        "brokers": [{"node_id": NODE, "host": HOST, "port": PORT}],
        "cluster_id": "fake",
        "controller_id": NODE,
        "topics": [
            {
                "error_code": 0,
                "name": name,
                "partitions": [
                    {
                        "error_code": 0,
                        "partition_index": p,
                        "leader_id": NODE,
                        "replica_nodes": [NODE],
                        "isr_nodes": [NODE],
                    }
                    for p in range(n)
                ],
            }
            for name, n in topics.items()
        ],
    }


class FakeConnection(BrokerConnection):
    def __init__(self, handler: Handler, versions: Mapping[int, tuple[int, int]]) -> None:
        super().__init__(HOST, PORT, node_id=NODE)
        self.handler = handler
        self.broker_versions = dict(versions)
        self.versions = negotiate(self.broker_versions)
        self.requests: list[tuple[ApiKey, dict[str, Any]]] = []
        self._open = True

    @property
    def connected(self) -> bool:
        return self._open

    async def submit(self, key: ApiKey, version: int, body: Mapping[str, Any], *, expect_response: bool = True) -> Any:
        self.requests.append((key, dict(body)))
        answer = self.handler(key, version, body)
        if not expect_response:
            return None
        return encode_response(RequestHeader(int(key), version, 7, "fake", 0), answer)

    async def wait(self, pending: Any, *, timeout_ms: int | None = None) -> bytes:
        return pending

    async def aclose(self) -> None:
        self._open = False


class FakeCluster(Cluster):
    """Every connection is ``self.conn``; ``versions`` overrides what the fake broker advertises."""

    def __init__(self, handler: Handler, versions: Mapping[int, tuple[int, int]] | None = None) -> None:
        super().__init__("fake:1", retry_backoff_ms=1, reconnect_backoff_ms=1)
        self.conn = FakeConnection(handler, versions or SUPPORTED_VERSIONS)

    async def _connect(self, key: Any, host: str, port: int) -> BrokerConnection:
        return self.conn
