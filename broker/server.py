"""TCP front end: size-prefixed frames in, responses out, in request order.

Per connection, one reader decodes and handles requests one at a time, as Kafka does; a handler may hand back a
Deferred response (Produce waiting for its fsync) so the reader can take the next request meanwhile, which lets
pipelined produce requests share one group-committed fsync. Responses go out strictly in request order: the reader
sends a ready response itself when nothing is queued ahead of it (no task switch), otherwise it queues it for the
connection's writer.
A frame whose size is negative or above ``socket.request.max.bytes`` is never read: the connection is closed, as
is one whose header or body cannot be decoded.
"""

from __future__ import annotations

import struct
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import structlog
import trio
from oncelog.broker.apis import HANDLERS
from oncelog.broker.request import Deferred, Request
from oncelog.protocol import (
    ApiKey,
    DecodeError,
    ErrorCode,
    UnsupportedVersionError,
    api_versions_v0_error_body,
    decode_request,
    decode_request_header,
    encode_response,
)

if TYPE_CHECKING:
    from oncelog.broker.node import BrokerNode

log = structlog.get_logger(__name__)

_SIZE = struct.Struct(">i")
#: Responses queued per connection before the reader waits (clients keep at most 5 requests in flight).
MAX_QUEUED_RESPONSES = 32
#: What one receive asks for unless a larger frame is still missing more (larger asks cost more per call).
_RECEIVE_CHUNK = 64 * 1024
#: What the writer sends: an encoded response, or a function completing one later (see Deferred).
_Outgoing = bytes | Callable[[], Awaitable[bytes]]


class ConnectionClosed(Exception):
    """The peer closed the connection, or sent bytes that cannot be framed."""


class FrameReader:
    """Reads whole size-prefixed frames from a stream, refusing sizes above ``max_size`` before reading them."""

    def __init__(self, stream: trio.abc.ReceiveStream, max_size: int) -> None:
        self._stream = stream
        self._max_size = max_size
        self._buffer = bytearray()

    async def _fill(self, needed: int) -> None:
        while len(self._buffer) < needed:
            chunk = await self._stream.receive_some(max(_RECEIVE_CHUNK, needed - len(self._buffer)))
            if not chunk:
                raise ConnectionClosed("peer closed the connection" if not self._buffer else "truncated frame")
            self._buffer += chunk

    async def next_frame(self) -> bytes:
        await self._fill(4)
        (size,) = _SIZE.unpack_from(self._buffer)
        if size < 0 or size > self._max_size:
            raise ConnectionClosed(f"frame size {size} outside 0..{self._max_size} (socket.request.max.bytes)")
        await self._fill(4 + size)
        frame = bytes(self._buffer[4 : 4 + size])
        del self._buffer[: 4 + size]
        return frame


class Connection:
    """One client connection: reads requests, dispatches them, writes responses in order."""

    def __init__(self, broker: BrokerNode, stream: trio.SocketStream) -> None:
        self._broker = broker
        self._stream = stream
        try:
            self._client_host = str(stream.socket.getpeername()[0])
        except OSError:
            self._client_host = "?"
        self._reader = FrameReader(stream, broker.config.get_int("socket.request.max.bytes"))
        #: Responses handed to the writer and not yet sent; while any is, the reader must queue behind them.
        self._queued = 0

    async def serve(self) -> None:
        send, receive = trio.open_memory_channel[_Outgoing](MAX_QUEUED_RESPONSES)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._write_responses, receive)
                async with send:
                    await self._read_requests(send)
        except* ConnectionClosed as group:
            log.debug("connection_closed", client=self._client_host, reason=str(group.exceptions[0]))
        except* (trio.BrokenResourceError, trio.ClosedResourceError):
            log.debug("connection_reset", client=self._client_host)
        except* Exception as group:
            # Never let one connection's failure reach the listener: log it and drop the connection.
            log.error("connection_failed", client=self._client_host, exc_info=group)
        finally:
            await trio.aclose_forcefully(self._stream)

    async def _read_requests(self, send: trio.MemorySendChannel[_Outgoing]) -> None:
        idle_s = self._broker.config.get_int("connections.max.idle.ms") / 1000
        while True:
            with trio.move_on_after(idle_s) as idle:
                frame = await self._reader.next_frame()
            if idle.cancelled_caught:
                raise ConnectionClosed("idle for connections.max.idle.ms")
            response = await self._handle(frame)
            if response is None:
                continue
            if self._queued == 0 and isinstance(response, bytes):
                await self._send(response)
            else:
                self._queued += 1
                await send.send(response)

    async def _handle(self, frame: bytes) -> _Outgoing | None:
        try:
            header = decode_request_header(frame)
        except UnsupportedVersionError as exc:
            if exc.header.api_key == ApiKey.API_VERSIONS:
                # KIP-511: answer with a v0 body carrying our ranges so the client retries with a version we support.
                return api_versions_v0_error_body(exc.header.correlation_id, ErrorCode.UNSUPPORTED_VERSION)
            raise ConnectionClosed(f"unsupported api {exc.header.api_key} version {exc.header.api_version}") from None
        except DecodeError as exc:
            raise ConnectionClosed(f"undecodable request header: {exc}") from None
        try:
            body = decode_request(header, frame)
        except DecodeError as exc:
            log.info(
                "bad_request",
                client=self._client_host,
                api_key=header.api_key,
                version=header.api_version,
                error=str(exc),
                head=frame[:64].hex(),
            )
            raise ConnectionClosed(f"undecodable request body: {exc}") from None
        handler = HANDLERS[ApiKey(header.api_key)]
        request = Request(header, body, self._client_host)
        try:
            result = await handler(self._broker, request)
        except Exception:
            log.exception("handler_failed", api_key=header.api_key, version=header.api_version)
            raise ConnectionClosed("internal error while handling a request") from None
        if result is None:
            return None
        if isinstance(result, Deferred):

            async def complete(deferred: Deferred = result) -> bytes:
                return encode_response(header, await deferred.complete())

            return complete
        return encode_response(header, result)

    async def _write_responses(self, receive: trio.MemoryReceiveChannel[_Outgoing]) -> None:
        async with receive:
            async for item in receive:
                await self._send(item if isinstance(item, bytes) else await item())
                self._queued -= 1

    async def _send(self, response: bytes) -> None:
        await self._stream.send_all(_SIZE.pack(len(response)) + response)


async def serve(broker: BrokerNode, host: str, port: int, *, task_status: trio.TaskStatus[int]) -> None:
    """Listen on host:port and serve every connection in this task's nursery; reports the bound port."""
    listeners = await trio.open_tcp_listeners(port, host=host)
    bound_port = listeners[0].socket.getsockname()[1]
    log.info("listening", host=host, port=bound_port)
    task_status.started(bound_port)

    async def handle(stream: trio.SocketStream) -> None:
        await Connection(broker, stream).serve()

    await trio.serve_listeners(handle, listeners)
