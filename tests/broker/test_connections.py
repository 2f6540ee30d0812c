"""Connection handling: pipelined requests answered in order, fairness between connections, idle connections closed."""

from __future__ import annotations

import socket
import struct
import time

import trio
from oncelog.broker.server import Connection
from oncelog.broker.socket_io import NonBlockingSocket
from oncelog.protocol import ApiKey, ErrorCode, decode_response, encode_request

from .conftest import WireClient

_SIZE = struct.Struct(">i")
HEARTBEAT = {"group_id": "no-such-group", "generation_id": 1, "member_id": "m"}
#: Metadata v1 for no topics: a small answer, and a handler that never waits (so only the server loop can yield).
NO_TOPICS = {"topics": []}


def _wire_client(sock: socket.socket) -> WireClient:
    return WireClient(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))


def _frame(correlation_id: int, api_key: ApiKey = ApiKey.HEARTBEAT, version: int = 0, body: dict = HEARTBEAT) -> bytes:
    data = encode_request(api_key, version, correlation_id, "conn-test", body)
    return _SIZE.pack(len(data)) + data


def _correlation_id(frame: bytes | None) -> int:
    assert frame is not None, "broker closed the connection"
    return struct.unpack_from(">i", frame)[0]


async def test_pipelined_requests_are_answered_in_order(broker, client) -> None:
    # Many requests in one write: the broker handles them back to back without waiting on the socket.
    await client.send_raw(b"".join(_frame(i) for i in range(1, 201)))
    for expected in range(1, 201):
        frame = await client.read_frame()
        assert _correlation_id(frame) == expected
        assert decode_response(ApiKey.HEARTBEAT, 0, frame).error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_a_flooding_connection_does_not_starve_another(broker) -> None:
    flood = 2000
    busy, busy_end = socket.socketpair()
    other, other_end = socket.socketpair()
    # Everything is readable before the connections start, so the busy one never has to wait for its socket.
    busy.sendall(b"".join(_frame(i, ApiKey.METADATA, 1, NO_TOPICS) for i in range(flood)))
    other.sendall(_frame(1))
    busy_client, other_client = _wire_client(busy), _wire_client(other)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(Connection(broker.node, NonBlockingSocket(busy_end)).serve)
        nursery.start_soon(Connection(broker.node, NonBlockingSocket(other_end)).serve)
        await trio.lowlevel.wait_readable(other)
        answered_meanwhile = len(busy.recv(1 << 22, socket.MSG_PEEK | socket.MSG_DONTWAIT))
        assert _correlation_id(await other_client.read_frame()) == 1
        first = await busy_client.read_frame()
        assert answered_meanwhile < flood * (len(first) + 4) / 10
        for expected in range(1, flood):
            assert _correlation_id(await busy_client.read_frame()) == expected
        nursery.cancel_scope.cancel()


async def test_idle_connection_is_closed_and_active_one_kept(start_broker) -> None:
    broker = await start_broker(connections_max_idle_ms="400")
    idle = await broker.connect()
    active = await broker.connect()
    start = time.monotonic()
    while time.monotonic() - start < 1.0:
        response = await active.request(ApiKey.HEARTBEAT, 0, HEARTBEAT)
        assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
        await trio.sleep(0.1)
    assert await idle.is_closed_by_peer(timeout=0.5)
    response = await active.request(ApiKey.HEARTBEAT, 0, HEARTBEAT)
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID
