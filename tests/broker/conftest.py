"""In-process broker fixtures for handler and server tests (pytest-trio).

``broker`` runs a BrokerNode on a free 127.0.0.1 port with a fresh data dir inside the test's nursery;
``client`` is a raw wire client speaking our own codecs.
"""

from __future__ import annotations

import itertools
import struct
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
import trio
from oncelog.broker.config import BrokerConfig
from oncelog.broker.node import BrokerNode
from oncelog.protocol import ApiKey, decode_response, encode_request
from support.etcd import EtcdProcess

_SIZE = struct.Struct(">i")


class WireClient:
    """Sends one request at a time (or raw bytes) and reads size-prefixed responses."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self._correlation = itertools.count(1)
        self._buffer = bytearray()

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def read_frame(self) -> bytes | None:
        """The next response frame, or None when the broker closed the connection."""
        while True:
            if len(self._buffer) >= 4:
                (size,) = _SIZE.unpack_from(self._buffer)
                if len(self._buffer) >= 4 + size:
                    frame = bytes(self._buffer[4 : 4 + size])
                    del self._buffer[: 4 + size]
                    return frame
            chunk = await self.stream.receive_some(65536)
            if not chunk:
                return None
            self._buffer += chunk

    async def send(self, api_key: ApiKey, version: int, body: dict) -> int:
        correlation_id = next(self._correlation)
        data = encode_request(api_key, version, correlation_id, "wire-test", body)
        await self.stream.send_all(_SIZE.pack(len(data)) + data)
        return correlation_id

    async def request(self, api_key: ApiKey, version: int, body: dict):
        await self.send(api_key, version, body)
        frame = await self.read_frame()
        assert frame is not None, "broker closed the connection"
        return decode_response(api_key, version, frame)

    async def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        with trio.fail_after(timeout):
            try:
                return await self.read_frame() is None
            except trio.BrokenResourceError:
                return True


class RunningBroker:
    def __init__(self, node: BrokerNode, port: int, scope: trio.CancelScope, finished: trio.Event) -> None:
        self.node = node
        self.port = port
        self._scope = scope
        self._finished = finished

    async def connect(self, listener: str | None = None) -> WireClient:
        """A connection to the first listener, or to the one named."""
        port = self.port if listener is None else self.node.bound_ports[listener]
        return WireClient(await trio.open_tcp_stream("127.0.0.1", port))

    async def stop(self) -> None:
        """Shut the node down cleanly and wait until its logs are closed."""
        self._scope.cancel()
        await self._finished.wait()


def make_config(data_dir: Path, properties: dict[str, str] | None = None, **overrides: str) -> BrokerConfig:
    values = {"log.dirs": str(data_dir), "listeners": "127.0.0.1:0"}
    values.update({k.replace("_", "."): v for k, v in overrides.items()})
    values.update(properties or {})
    return BrokerConfig.from_sources(values)


@pytest.fixture
async def start_broker(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[Callable]:
    """Start brokers in the test's nursery: ``await start_broker(**properties)`` (underscores for dots, or pass a
    ``properties`` dict for names that hold underscores); all stop at test end."""
    running: list[RunningBroker] = []

    async def start(
        data_dir: Path | None = None, properties: dict[str, str] | None = None, **overrides: str
    ) -> RunningBroker:
        config = make_config(data_dir or tmp_path / "data", properties, **overrides)
        node = BrokerNode(config)
        scope = trio.CancelScope()
        finished = trio.Event()

        async def run(task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
            try:
                with scope:
                    await node.run(task_status=task_status)
            finally:
                finished.set()

        port = await nursery.start(run)
        broker = RunningBroker(node, port, scope, finished)
        running.append(broker)
        return broker

    yield start
    for broker in running:
        await broker.stop()


@pytest.fixture
async def broker(start_broker: Callable) -> RunningBroker:
    return await start_broker()


@pytest.fixture
async def client(broker: RunningBroker) -> WireClient:
    return await broker.connect()


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdProcess]:
    """A real etcd on free loopback ports for the module's tests (tests/broker/etcd, tests/broker/controller)."""
    with EtcdProcess() as server:
        yield server
