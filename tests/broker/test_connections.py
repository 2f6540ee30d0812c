"""Connection handling: pipelined requests answered in order, fairness between connections, idle connections closed."""

from __future__ import annotations

import socket
import struct
import time

import trio
from oncelog.broker.request import Deferred
from oncelog.broker.server import COALESCE_BYTES, Connection
from oncelog.broker.socket_io import NonBlockingSocket
from oncelog.protocol import ApiKey, ErrorCode, RequestHeader, decode_response, encode_request, encode_response
from oncelog.protocol.records import iter_records

from broker.conftest import WireClient
from broker.helpers import batch, create_topic_body, fetch_body, produce_body

_SIZE = struct.Struct(">i")
HEARTBEAT = {"group_id": "no-such-group", "generation_id": 1, "member_id": "m"}
#: Metadata v1 for no topics: a small answer, and a handler that never waits (so only the server loop can yield).
NO_TOPICS = {"topics": []}


def _tcp_pair() -> tuple[socket.socket, socket.socket]:
    """Two connected 127.0.0.1 TCP sockets: (client end, server end)."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client = socket.create_connection(listener.getsockname())
        server, _ = listener.accept()
    return client, server


def _wire_client(sock: socket.socket) -> WireClient:
    return WireClient(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))


def _frame(correlation_id: int, api_key: ApiKey = ApiKey.HEARTBEAT, version: int = 0, body: dict = HEARTBEAT) -> bytes:
    data = encode_request(api_key, version, correlation_id, "conn-test", body)
    return _SIZE.pack(len(data)) + data


def _correlation_id(frame: bytes | None) -> int:
    assert frame is not None, "broker closed the connection"
    return struct.unpack_from(">i", frame)[0]


async def test_pipelined_requests_are_answered_in_order(broker, client) -> None:
    # Many requests in one write, all readable before the broker answers the first.
    await client.send_raw(b"".join(_frame(i) for i in range(1, 201)))
    for expected in range(1, 201):
        frame = await client.read_frame()
        assert _correlation_id(frame) == expected
        assert decode_response(ApiKey.HEARTBEAT, 0, frame).error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_ready_answers_wait_behind_produce_answers_waiting_for_fsync(broker, client) -> None:
    # In fsync mode a Produce is answered only after its fsync; the heartbeats pipelined behind each one are ready at
    # once but must still go out after it.
    created = await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("order"))
    assert created.topics[0].error_code == ErrorCode.NONE
    assert broker.node.logs.get("order", 0).config.fsync_before_ack
    frames = [
        _frame(i, ApiKey.PRODUCE, 3, produce_body("order", 0, batch([b"v%d" % i]))) if i % 3 == 1 else _frame(i)
        for i in range(1, 61)
    ]
    await client.send_raw(b"".join(frames))
    for expected in range(1, 61):
        frame = await client.read_frame()
        assert _correlation_id(frame) == expected
        if expected % 3 == 1:
            produced = decode_response(ApiKey.PRODUCE, 3, frame)
            assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE


async def test_a_large_request_arriving_in_pieces_is_read_whole(client) -> None:
    created = await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("big"))
    assert created.topics[0].error_code == ErrorCode.NONE
    values = [bytes([i]) * 200_000 for i in range(4)]  # ~800 KB: bigger than one receive of the broker
    frame = _frame(7, ApiKey.PRODUCE, 3, produce_body("big", 0, batch(values)))
    pieces = [frame[:3], frame[3:70_000], frame[70_000:500_000], frame[500_000:]]
    for piece in pieces:  # the size prefix split too, and pauses so the broker sees each piece on its own
        await client.send_raw(piece)
        await trio.sleep(0.02)
    produced = decode_response(ApiKey.PRODUCE, 3, await client.read_frame())
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    fetched = await client.request(ApiKey.FETCH, 4, fetch_body("big", 0, 0, partition_max_bytes=4 << 20))
    assert [r.value for _, r in iter_records(fetched.responses[0].partitions[0].records)] == values
    # The connection carries on with the next, small request.
    assert (await client.request(ApiKey.HEARTBEAT, 0, HEARTBEAT)).error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_a_large_request_and_the_small_ones_sent_with_it_are_all_answered(client) -> None:
    # The large frame is received into a buffer of its own; the small ones behind it in the same send must not be
    # taken into it, nor lost.
    created = await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("mixed"))
    assert created.topics[0].error_code == ErrorCode.NONE
    values = [bytes([i]) * 300_000 for i in range(3)]
    produce = _frame(2, ApiKey.PRODUCE, 3, produce_body("mixed", 0, batch(values)))
    await client.send_raw(_frame(1) + produce + _frame(3) + _frame(4))
    assert [_correlation_id(await client.read_frame()) for _ in range(4)] == [1, 2, 3, 4]
    fetched = await client.request(ApiKey.FETCH, 4, fetch_body("mixed", 0, 0, partition_max_bytes=4 << 20))
    assert [r.value for _, r in iter_records(fetched.responses[0].partitions[0].records)] == values


async def test_a_flooding_connection_does_not_starve_another(broker) -> None:
    flood = 2000
    busy, busy_end = _tcp_pair()
    other, other_end = _tcp_pair()
    # Everything is readable before the connections start, so the busy one never has to wait for its socket.
    busy.sendall(b"".join(_frame(i, ApiKey.METADATA, 1, NO_TOPICS) for i in range(flood)))
    other.sendall(_frame(1))
    busy_client, other_client = _wire_client(busy), _wire_client(other)
    async with trio.open_nursery() as nursery:
        for end in (busy_end, other_end):
            nursery.start_soon(
                Connection(broker.node.server_context, NonBlockingSocket(end), broker.node.listeners[0]).serve
            )
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


def _frames_in(data: bytes) -> list[bytes]:
    """Split a run of size-prefixed frames."""
    frames = []
    while data:
        (size,) = _SIZE.unpack_from(data)
        frames.append(data[4 : 4 + size])
        data = data[4 + size :]
    return frames


async def test_the_writer_sends_ready_answers_together_and_never_holds_one_for_a_later_one(broker) -> None:
    """Answers already complete leave in one send; a Deferred one not complete yet first lets the earlier ones go,
    and no send passes ``COALESCE_BYTES`` unless one answer alone does."""
    sends: list[list[bytes]] = []

    pending = bytearray()  # a large answer goes out as its size prefix, then its bytes: one send recorded

    class RecordingSocket(NonBlockingSocket):
        async def send_all(self, data: bytes) -> None:
            pending.extend(data)
            if len(pending) >= 4 and len(pending) >= 4 + _SIZE.unpack_from(pending)[0]:
                sends.append(_frames_in(bytes(pending)))
                pending.clear()

    _peer, end = _tcp_pair()
    connection = Connection(broker.node.server_context, RecordingSocket(end), broker.node.listeners[0])
    header = RequestHeader(ApiKey.HEARTBEAT, 0, 5, "t", 0)
    body = {"error_code": ErrorCode.NONE, "throttle_time_ms": 0}
    answer = encode_response(header, body)
    fsynced = trio.Event()

    async def complete_now() -> dict:
        return body

    async def complete_after_fsync() -> dict:
        await fsynced.wait()
        return body

    big, huge = b"x" * (COALESCE_BYTES - 10), b"y" * (2 * COALESCE_BYTES)
    queue = [
        b"a",
        (header, Deferred(complete_now, lambda: True)),
        (header, Deferred(complete_after_fsync, fsynced.is_set)),
        b"d",
        big,
        b"e",
        huge,
    ]
    send, receive = trio.open_memory_channel(len(queue))
    for item in queue:
        send.send_nowait(item)
    connection._queued = len(queue)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(connection._write_responses, receive)
        await trio.testing.wait_all_tasks_blocked()
        assert sends == [[b"a", answer]]  # the answer waiting for its fsync holds back nothing queued before it
        assert connection._queued == len(queue) - 2
        fsynced.set()
        await send.aclose()
    assert sends[1:] == [[answer, b"d"], [big, b"e"], [huge]]
    assert connection._queued == 0
    end.close()
