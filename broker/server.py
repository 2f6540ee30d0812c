"""TCP front end: size-prefixed frames in, responses out, in request order.

Per connection, one reader decodes and handles requests one at a time, as Kafka does; a handler may hand back a
Deferred response (Produce waiting for its fsync) so the reader can take the next request meanwhile, which lets
pipelined produce requests share one group-committed fsync. Responses leave strictly in request order: the reader
sends a ready response itself when nothing is queued ahead of it, otherwise it queues it for the connection's writer,
which sends the queued responses that are complete back to back in one system call (answers whose fsyncs finished
together leave together, without a scheduler pass each).
Socket calls enter the trio scheduler only when they would block (``broker.socket_io``); the reader checkpoints
after ``REQUESTS_PER_CHECKPOINT`` requests (or ``BYTES_PER_CHECKPOINT`` bytes of them) handled without waiting, so a
busy connection cannot starve the others.
On a SASL listener a connection first authenticates (``broker.sasl.session``: Kafka's state machine), and only
then are its requests dispatched.
A frame whose size is negative or above ``socket.request.max.bytes`` is never read: the connection is closed, as
is one whose header or body cannot be decoded, and one that sent no request for ``connections.max.idle.ms`` (a
sweeper looks every tenth of that period, so a connection is closed within 1.1 times it).
Against hostile clients (docs/FAULTS.md, "Hostile input"): memory follows the bytes received and frames of 64 KiB or
more share the ``queued.max.request.bytes`` budget (``FrameReader``); large non-Produce requests are decoded in a
worker thread, rationed (``DECODE_REST_FACTOR``) unless a registered follower's fetcher sent them
(``replication.fetcher_identity``); a connection reads nothing while its response cannot be sent or
``MAX_QUEUED_RESPONSE_BYTES`` of them wait; repeated errors are logged at a limited rate (``broker.log_limit``).
"""

from __future__ import annotations

import errno
import struct
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn, TypeVar

import structlog
import trio
from oncelog.broker.apis import DIGESTS, HANDLERS
from oncelog.broker.listeners import Listener
from oncelog.broker.log_limit import LogRateLimiter
from oncelog.broker.request import Deferred, MalformedRequest, Request
from oncelog.broker.request_budget import UNBOUNDED, RequestBudget, ResponseHold
from oncelog.broker.sasl.session import SaslSession
from oncelog.broker.socket_io import NonBlockingSocket
from oncelog.broker.startup import StartupError
from oncelog.broker.tls_socket import TlsSocket
from oncelog.protocol import (
    ApiKey,
    DecodeError,
    ErrorCode,
    RequestHeader,
    UnsupportedVersionError,
    api_versions_v0_error_body,
    decode_request,
    decode_request_header,
    encode_response,
)

if TYPE_CHECKING:
    import ssl

    from oncelog.broker.config import BrokerConfig
    from oncelog.broker.sasl.config import SaslListenerConfig
    from oncelog.broker.sasl.credentials import ScramCredentialStore
    from oncelog.broker.services import Broker

log = structlog.get_logger(__name__)

_SIZE = struct.Struct(">i")
#: accept() failures that mean the system is out of a resource, not that the listener is broken (trio's list).
_ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
#: Responses queued per connection before the reader waits (clients keep at most 5 requests in flight).
MAX_QUEUED_RESPONSES = 32
#: Requests a connection may handle back to back without its socket waiting before it yields to other tasks.
REQUESTS_PER_CHECKPOINT = 16
#: ... or requests of this many bytes: finished fsyncs are then taken in (and the next started) between large
#: produce requests, so fsyncs overlap with reading instead of waiting for a run of requests to end.
BYTES_PER_CHECKPOINT = 1 << 20
#: The idle sweeper looks at every connection this many times per ``connections.max.idle.ms``.
IDLE_CHECKS_PER_PERIOD = 10
#: Bytes asked of one recv unless a larger frame is still missing more. Larger asks cost more than they save for
#: small requests: the allocation of the result and its trim back to what arrived take a system call each once they
#: pass glibc's thresholds (128 KiB); the rest of a large frame is asked for in one call.
_RECEIVE_CHUNK = 64 * 1024
#: Frames this large are gathered in a buffer of their own and decoded in place (no copies of the records); the
#: buffer grows with the bytes received, so a client announcing big frames cannot make the broker hold memory it
#: never sends.
LARGE_FRAME_BYTES = _RECEIVE_CHUNK
#: Bytes asked of one recv while gathering a large frame (CPython allocates the whole ask first, then trims it).
LARGE_RECEIVE_CHUNK = 256 * 1024
#: A large frame holds its reservation of ``queued.max.request.bytes`` while it arrives; it must arrive within this
#: many seconds plus one second per ``LARGE_FRAME_MIN_BYTES_PER_S`` bytes (18 s for 8 MB, 110 s for 100 MB), or
#: the connection is closed: clients announcing frames they never send hold the budget that long, not until
#: ``connections.max.idle.ms``. (Kafka has no such limit, nor a bounded pool by default.)
LARGE_FRAME_RECEIVE_GRACE_S = 10.0
LARGE_FRAME_MIN_BYTES_PER_S = 1024 * 1024
#: The writer sends the responses that are ready back to back in one system call, up to this many bytes.
COALESCE_BYTES = 64 * 1024
#: Encoded responses a connection may have queued, not yet sent, before it reads no more requests (Kafka mutes a
#: connection whose response cannot be sent). With the one being sent, a client that never reads pins at most
#: this plus one response (a Fetch response: at most ``fetch.max.bytes`` plus one batch).
MAX_QUEUED_RESPONSE_BYTES = 1024 * 1024
#: Requests this large, but for Produce (whose records are decoded as views), are decoded in a worker thread, one
#: at a time broker-wide...
THREAD_DECODE_BYTES = 32 * 1024
#: ... and after each the next one waits this many times as long as it took: such decodes take at most a tenth of
#: the broker's time, however many clients send them, and the other connections keep the rest.
DECODE_REST_FACTOR = 9
#: The interpreter's thread switch interval while the broker serves (Python's default 5 ms): the event loop waits
#: for the GIL at most this long when a worker thread decodes.
SWITCH_INTERVAL_S = 0.0005
#: How often connections waiting for the request budget or their turn to decode are checked for a client gone.
DEPARTED_CHECK_S = 1.0
#: The periodic looks over every connection (departed clients, idle connections) let the other tasks run after this
#: many connections: with thousands of connections one look in a single step would hold the event loop for
#: milliseconds (3.7 ms of CPU for 1,000 connections waiting for the request budget, each a ``getsockopt``).
CONNECTIONS_PER_CHECKPOINT = 64
#: Seconds the accept loop waits after the system refused a new connection (EMFILE...), as trio's does.
ACCEPT_RETRY_S = 0.1
#: Repeated errors a client or the system can cause are logged at most so often (``broker.log_limit``).
_LOG_LIMIT = LogRateLimiter()
#: The one worker-thread decode at a time, per trio run.
_DECODE_LIMITER: trio.lowlevel.RunVar[trio.CapacityLimiter] = trio.lowlevel.RunVar("decode_limiter")
#: Requests whose bytes may hold secrets: never logged.
_SECRET_APIS = frozenset({ApiKey.SASL_AUTHENTICATE, ApiKey.ALTER_USER_SCRAM_CREDENTIALS})
_T = TypeVar("_T")
#: What the writer sends: an encoded response, or a Deferred one with the header to encode it for.
_Outgoing = bytes | tuple[RequestHeader, Deferred]


def _decode_and_digest(header: RequestHeader, frame: bytes | memoryview):
    """In the worker thread: the request's body, reduced by its API's digest (``apis.DIGESTS``) if it has one."""
    body = decode_request(header, frame)
    digest = DIGESTS.get(ApiKey(header.api_key))
    if digest is not None:
        digest(header.api_version, body)
    return body


def _encode_dropping(header: RequestHeader, result: dict, dropped: list[object]) -> bytes:
    """In the worker thread: the encoded response; the objects in ``dropped`` (the decoded request) freed there."""
    dropped.clear()
    return encode_response(header, result)


def _decode_limiter() -> trio.CapacityLimiter:
    try:
        return _DECODE_LIMITER.get()
    except LookupError:
        limiter = trio.CapacityLimiter(1)
        _DECODE_LIMITER.set(limiter)
        return limiter


class _Taken:
    """A frame handed over with its only reference, so the callee can drop it before it returns."""

    __slots__ = ("frame",)

    def __init__(self, frame: bytes | memoryview) -> None:
        self.frame: bytes | memoryview | None = frame


class ConnectionClosed(Exception):
    """The peer closed the connection, or sent bytes that cannot be framed."""


class FrameReader:
    """Reads whole size-prefixed frames from a stream, refusing sizes above ``max_size`` before reading them.

    Memory follows the bytes that arrived, never the size a prefix announces: a frame's buffer grows as its bytes
    are received. A small frame (below ``LARGE_FRAME_BYTES``) is read within the connection's receive buffer, which
    holds at most it and ``_RECEIVE_CHUNK`` bytes more. Before reading the body of a larger one the reader reserves
    its size in the broker-wide ``budget`` (``queued.max.request.bytes``), waiting without reading while it does
    not fit; the caller gives it back with ``release`` once the request is handled (or the connection ends). Small
    requests never wait for the budget, and a large frame must arrive in ``LARGE_FRAME_RECEIVE_GRACE_S`` plus a
    second per ``LARGE_FRAME_MIN_BYTES_PER_S`` bytes, so clients announcing large frames they never send delay only
    other large frames, and not for long."""

    def __init__(self, stream: NonBlockingSocket, max_size: int, budget: RequestBudget | None = None) -> None:
        self._stream = stream
        self._max_size = max_size
        self._budget = budget or RequestBudget(UNBOUNDED)
        self._buffer = bytearray()
        self._reserved = 0
        #: True while the reader waits for the budget, reading nothing (so it would not see its client go).
        self.waiting = False

    async def _fill(self, needed: int) -> None:
        while len(self._buffer) < needed:
            chunk = await self._stream.receive_some(max(_RECEIVE_CHUNK, needed - len(self._buffer)))
            if not chunk:
                raise ConnectionClosed("peer closed the connection" if not self._buffer else "truncated frame")
            self._buffer += chunk

    def release(self) -> None:
        """Give back the budget the last frame reserved (idempotent)."""
        if self._reserved:
            self._budget.release(self._reserved)
            self._reserved = 0

    async def next_frame(self) -> bytes | memoryview:
        """The next frame without its size prefix, its size reserved in the budget until ``release``. One of at
        least ``LARGE_FRAME_BYTES`` not yet received whole is gathered in a buffer of its own and returned as a
        read-only memoryview (decoded in place, see ``decode_request``); any other is copied out of the receive
        buffer as bytes."""
        self.release()
        await self._fill(4)
        (size,) = _SIZE.unpack_from(self._buffer)
        if size < 0 or size > self._max_size:
            raise ConnectionClosed(f"frame size {size} outside 0..{self._max_size} (socket.request.max.bytes)")
        if size >= LARGE_FRAME_BYTES and len(self._buffer) < 4 + size:
            self.waiting = True
            try:
                self._reserved = await self._budget.reserve(size)
            finally:
                self.waiting = False
            return await self._receive_large(size)
        await self._fill(4 + size)
        with memoryview(self._buffer) as view:
            frame = bytes(view[4 : 4 + size])
        del self._buffer[: 4 + size]
        return frame

    async def _receive_large(self, size: int) -> memoryview:
        with memoryview(self._buffer) as buffered:
            frame = bytearray(buffered[4:])
        self._buffer.clear()
        allowed_s = LARGE_FRAME_RECEIVE_GRACE_S + size / LARGE_FRAME_MIN_BYTES_PER_S
        with trio.move_on_after(allowed_s):
            while len(frame) < size:
                chunk = await self._stream.receive_some(min(size - len(frame), LARGE_RECEIVE_CHUNK))
                if not chunk:
                    raise ConnectionClosed("truncated frame")
                frame += chunk
                # The bytes of a large frame often wait in the kernel already: without a checkpoint per chunk, an
                # 8 MiB frame would be copied in one step while every other connection waits.
                await trio.lowlevel.checkpoint()
            return memoryview(frame).toreadonly()
        raise ConnectionClosed(f"frame of {size} bytes not received within {allowed_s:.0f} s ({len(frame)} came)")


@dataclass(frozen=True)
class ServerContext:
    """What the connections of one broker share, built by the node: the broker its request handlers are given,
    the connection settings, the broker-wide request and response budgets, and each listener's SASL and TLS."""

    #: The broker as request handlers see it.
    broker: Broker
    #: Read here: socket.request.max.bytes, connection.failed.authentication.delay.ms, connections.max.idle.ms
    #: (none of them dynamic).
    config: BrokerConfig
    #: Request bytes in flight on every listener (``queued.max.request.bytes``).
    request_budget: RequestBudget
    #: Fetch response bytes not yet sent, across connections.
    response_budget: RequestBudget
    scram_credentials: ScramCredentialStore
    #: Per SASL listener name: its mechanisms and their server-side settings.
    sasl: Mapping[str, SaslListenerConfig]
    #: Per SSL or SASL_SSL listener name: its TLS context.
    ssl_contexts: Mapping[str, ssl.SSLContext]
    #: ``check(client_id, listener_name)``: whether a request is a registered follower's fetcher's, whose large
    #: requests are decoded unrationed (``replication.fetcher_identity``); None on a single node.
    is_replica_fetcher: Callable[[str | None, str], bool] | None = None


class Connection:
    """One client connection: reads requests, dispatches them, writes responses in order."""

    def __init__(self, context: ServerContext, sock: NonBlockingSocket, listener: Listener) -> None:
        """``listener``: the one the connection arrived on."""
        self._broker = context.broker
        self._auth_failure_delay_s = context.config.get_int("connection.failed.authentication.delay.ms") / 1000
        self._sock = sock
        self._listener = listener
        #: On a SASL listener, the authentication every request must wait for.
        self._sasl = SaslSession(context.sasl[listener.name], context.scram_credentials) if listener.uses_sasl else None
        self._client_host = sock.peer_host()
        self._reader = FrameReader(sock, context.config.get_int("socket.request.max.bytes"), context.request_budget)
        #: Responses handed to the writer and not yet sent; while any is, the reader must queue behind them.
        self._queued = 0
        #: Bytes of the encoded responses among them; the reader reads no request while they reach
        #: ``MAX_QUEUED_RESPONSE_BYTES`` (``_drained`` is set each time the writer sent some).
        self._queued_bytes = 0
        self._drained: trio.Event | None = None
        #: The share of the broker's response budget the response being made holds (one request at a time).
        self._response_hold = ResponseHold(context.response_budget)
        #: Requests read so far; the idle sweeper compares it between looks.
        self.requests = 0
        #: True while a request waits for its turn to be decoded in the worker thread.
        self._waiting_turn = False
        self._scope = trio.CancelScope()
        self._is_replica_fetcher = context.is_replica_fetcher

    def close_if_departed(self) -> None:
        """Close the connection if it waits for the request budget or its turn to decode, reading nothing, and its
        client has gone (``_close_departed``): it would not see the close until its turn came."""
        if (self._reader.waiting or self._waiting_turn) and not self._scope.cancel_called and self._sock.peer_gone():
            log.debug("connection_closed", client=self._client_host, reason="peer closed while its request waited")
            self._scope.cancel()

    def close_idle(self) -> None:
        """Close the connection because it sent no request for ``connections.max.idle.ms``."""
        if self._scope.cancel_called:
            return
        log.debug("connection_closed", client=self._client_host, reason="idle for connections.max.idle.ms")
        self._scope.cancel()

    async def serve(self) -> None:
        send, receive = trio.open_memory_channel[_Outgoing](MAX_QUEUED_RESPONSES)
        try:
            with self._scope:
                if self._sasl is not None:
                    await self._authenticate(self._sasl)
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
            self._reader.release()
            self._sock.close()

    async def _read_requests(self, send: trio.MemorySendChannel[_Outgoing]) -> None:
        without_waiting = bytes_without_waiting = 0
        while True:
            waits = self._sock.waits
            # The frame's only reference is handed over: _handle drops it once it is decoded.
            taken = _Taken(await self._reader.next_frame())
            bytes_without_waiting += len(taken.frame or b"")
            self.requests += 1
            try:
                response = await self._handle(taken)
            finally:
                self._reader.release()
            try:
                if response is not None and self._response_hold.held:
                    # A response holding part of the response budget is sent by the reader itself, once the
                    # ones before it are gone, so the budget is given back as soon as it is sent.
                    await self._wait_writer(lambda: self._queued == 0)
                if response is None:
                    pass
                elif self._queued == 0 and isinstance(response, bytes):
                    # While the client does not read, the connection is muted: no request is read meanwhile.
                    await self._send_framed(response)
                else:
                    self._queued += 1
                    if isinstance(response, bytes):
                        self._queued_bytes += len(response)
                    try:
                        send.send_nowait(response)
                    except trio.WouldBlock:
                        await send.send(response)
                    await self._wait_writer(lambda: self._queued_bytes < MAX_QUEUED_RESPONSE_BYTES)
            finally:
                self._response_hold.release()
            if self._sock.waits != waits:
                without_waiting = bytes_without_waiting = 0
            else:
                without_waiting += 1
                if without_waiting >= REQUESTS_PER_CHECKPOINT or bytes_without_waiting >= BYTES_PER_CHECKPOINT:
                    without_waiting = bytes_without_waiting = 0
                    await trio.lowlevel.checkpoint()

    async def _authenticate(self, session: SaslSession) -> None:
        """Run Kafka's SASL exchange (``SaslSession``) until it completes; raises ConnectionClosed where Kafka closes
        the connection (after sending the error response it sends, if any)."""
        while not session.complete:
            frame = await self._reader.next_frame()
            self.requests += 1
            if session.raw_tokens:
                step = session.on_raw_token(bytes(frame))
            else:
                header = self._decode_header(frame)
                if isinstance(header, bytes):  # ApiVersions' UNSUPPORTED_VERSION answer
                    await self._sock.send_all(_SIZE.pack(len(header)) + header)
                    continue
                known = header.api_key in (ApiKey.API_VERSIONS, ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
                body = self._decode_body(header, frame) if known else None
                step = session.on_request(header.api_key, header.api_version, body)
                if step.handle:
                    answer = await self._dispatch(header, body)
                    assert answer is not None and not isinstance(answer, Deferred)
                    step_response = encode_response(header, answer)
                    await self._sock.send_all(_SIZE.pack(len(step_response)) + step_response)
                    continue
                if step.response is not None:
                    data = encode_response(header, step.response)
                    await self._sock.send_all(_SIZE.pack(len(data)) + data)
            if step.raw is not None:
                await self._sock.send_all(_SIZE.pack(len(step.raw)) + step.raw)
            if step.close:
                # Kafka delays closing a connection that failed authentication (KIP-306's
                # connection.failed.authentication.delay.ms): the client reads the error before the connection ends.
                if step.response is not None or step.raw is not None:
                    await trio.sleep(self._auth_failure_delay_s)
                log.info(
                    "authentication_failed",
                    client=self._client_host,
                    listener=self._listener.name,
                    mechanism=session.server.mechanism if session.server is not None else None,
                    reason=step.reason,
                )
                raise ConnectionClosed(f"SASL authentication failed: {step.reason}")
        assert session.server is not None
        log.debug(
            "authenticated",
            client=self._client_host,
            listener=self._listener.name,
            mechanism=session.server.mechanism,
            user=session.user,
        )

    def _decode_header(self, frame: bytes | memoryview) -> RequestHeader | bytes:
        """The frame's header, or the encoded answer to an ApiVersions of a version we lack; ConnectionClosed when
        the header cannot be decoded or names an API version we do not have."""
        try:
            return decode_request_header(frame)
        except UnsupportedVersionError as exc:
            if exc.header.api_key == ApiKey.API_VERSIONS:
                # KIP-511: answer with a v0 body carrying our ranges so the client retries with a version we support.
                return api_versions_v0_error_body(exc.header.correlation_id, ErrorCode.UNSUPPORTED_VERSION)
            raise ConnectionClosed(f"unsupported api {exc.header.api_key} version {exc.header.api_version}") from None
        except DecodeError as exc:
            raise ConnectionClosed(f"undecodable request header: {exc}") from None

    async def _handle(self, taken: _Taken) -> _Outgoing | None:
        frame, taken.frame = taken.frame, None
        assert frame is not None
        header = self._decode_header(frame)
        if isinstance(header, bytes):
            return header
        large = len(frame) >= THREAD_DECODE_BYTES and header.api_key != ApiKey.PRODUCE
        if large:
            # Up to MAX_REQUEST_ELEMENTS objects: decoded in the worker thread, so the event loop keeps serving the
            # other connections meanwhile, and rationed, so clients sending such requests over and over cannot take
            # the broker's time from the others; but for a follower's fetcher, whose fetches of many partitions are
            # this large all the time (its client id proves it: ``replication.fetcher_identity``).
            rationed = self._is_replica_fetcher is None or not self._is_replica_fetcher(
                header.client_id, self._listener.name
            )
            try:
                body = await self._in_worker(_decode_and_digest, header, frame, rationed=rationed)
            except DecodeError as exc:
                self._bad_request(header, exc, frame)
        else:
            body = self._decode_body(header, frame)
        if header.api_key != ApiKey.PRODUCE:
            # Decoded into objects that keep no view of the frame (only Produce's records are views): its bytes and
            # its share of queued.max.request.bytes go now, not when the request is answered (a parked Fetch waits
            # up to its max_wait), as Kafka's RequestChannel releases the buffer of such requests once parsed.
            del frame
            self._reader.release()
        result = await self._dispatch(header, body)
        if result is None or isinstance(result, Deferred):
            return None if result is None else (header, result)
        if large and header.api_key != ApiKey.FETCH:
            # The answer to a large request is as large (90,000 topic names: 0.8 MB, tens of ms to encode), so it is
            # encoded in the worker too, which also frees the decoded request there. Not a Fetch's: its partitions
            # were merged in the worker already and its records are copied, not built, so rationing its encoding
            # would only slow consumers and followers that fetch many partitions.
            dropped = [body]
            del body
            return await self._in_worker(_encode_dropping, header, result, dropped, rationed=rationed)
        return encode_response(header, result)

    async def _in_worker(self, work: Callable[..., _T], *args: object, rationed: bool = True) -> _T:
        """``work(*args)`` in a worker thread; ``rationed``, one such call at a time broker-wide, each followed by a
        rest ``DECODE_REST_FACTOR`` times its length (so these calls take at most a tenth of the broker's time)."""
        if not rationed:
            return await trio.to_thread.run_sync(work, *args)
        self._waiting_turn = True
        try:
            await _decode_limiter().acquire()
        finally:
            self._waiting_turn = False
        try:
            if self._sock.peer_gone():
                # Queued behind other work while its client went away: nobody would read the answer.
                raise ConnectionClosed("peer closed while its request waited for the worker thread")
            started = trio.current_time()
            try:
                return await trio.to_thread.run_sync(work, *args)
            finally:
                await trio.sleep((trio.current_time() - started) * DECODE_REST_FACTOR)
        finally:
            _decode_limiter().release()

    def _decode_body(self, header: RequestHeader, frame: bytes | memoryview):
        try:
            return decode_request(header, frame)
        except DecodeError as exc:
            self._bad_request(header, exc, frame)

    def _bad_request(self, header: RequestHeader, exc: Exception, frame: bytes | memoryview | None = None) -> NoReturn:
        """Log a request the broker cannot take (at a limited rate) and close the connection."""
        _LOG_LIMIT.log(
            log.info,
            "bad_request",
            self._client_host,
            client=self._client_host,
            api_key=header.api_key,
            version=header.api_version,
            error=str(exc),
            # Never log what may hold a secret (SASL tokens, salted passwords).
            head=None if frame is None or header.api_key in _SECRET_APIS else frame[:64].hex(),
        )
        kind = "undecodable request body" if isinstance(exc, DecodeError) else "malformed request"
        raise ConnectionClosed(f"{kind}: {exc}") from None

    async def _dispatch(self, header: RequestHeader, body) -> dict | Deferred | None:
        handler = HANDLERS[ApiKey(header.api_key)]
        request = Request(
            header, body, self._client_host, self._listener.name, self._close_when_peer_gone, self._response_hold
        )
        try:
            result = await handler(self._broker, request)
        except MalformedRequest as exc:
            self._bad_request(header, exc)
        except Exception:
            log.exception("handler_failed", api_key=header.api_key, version=header.api_version)
            raise ConnectionClosed("internal error while handling a request") from None
        return result

    def _wake_reader(self) -> None:
        if self._drained is not None:
            self._drained.set()
            self._drained = None

    async def _wait_writer(self, done: Callable[[], bool]) -> None:
        """Wait until ``done()``, looked at each time the writer has sent something."""
        while not done():
            self._drained = trio.Event()
            await self._drained.wait()

    async def _send_framed(self, response: bytes) -> None:
        """Send one response with its size prefix; a large one without copying it next to the prefix."""
        if len(response) <= COALESCE_BYTES:
            await self._sock.send_all(_SIZE.pack(len(response)) + response)
        else:
            await self._sock.send_all(_SIZE.pack(len(response)))
            await self._sock.send_all(response)

    async def _close_when_peer_gone(self) -> None:
        """Close the connection once its peer has gone (see ``Request.watch_disconnect``)."""
        await self._sock.wait_peer_gone()
        log.debug("connection_closed", client=self._client_host, reason="peer closed during a parked request")
        self._scope.cancel()

    async def _write_responses(self, receive: trio.MemoryReceiveChannel[_Outgoing]) -> None:
        """Send the queued responses in order. Those already complete go out together, up to ``COALESCE_BYTES``
        per send; a Deferred one not complete yet first lets the ones before it go."""
        out = bytearray()  # framed responses not sent yet
        in_out = 0  # how many
        queued_out = 0  # their bytes counted in self._queued_bytes

        async def send_out() -> None:
            nonlocal in_out, queued_out
            if out:
                await self._sock.send_all(out)
                out.clear()
                self._queued -= in_out
                self._queued_bytes -= queued_out
                in_out = queued_out = 0
                self._wake_reader()

        async with receive:
            while True:
                try:
                    item = receive.receive_nowait()
                except trio.WouldBlock:
                    await send_out()
                    try:
                        item = await receive.receive()
                    except trio.EndOfChannel:
                        return
                except trio.EndOfChannel:
                    await send_out()
                    return
                counted = 0
                if isinstance(item, bytes):
                    data = item
                    counted = len(item)
                else:
                    header, deferred = item
                    if not deferred.ready():
                        await send_out()
                    data = encode_response(header, await deferred.complete())
                if len(out) + len(data) > COALESCE_BYTES:
                    await send_out()
                if len(data) > COALESCE_BYTES:  # sent as it is, not copied
                    await self._send_framed(data)
                    self._queued -= 1
                    self._queued_bytes -= counted
                    self._wake_reader()
                    continue
                out += _SIZE.pack(len(data))
                out += data
                in_out += 1
                queued_out += counted


async def serve(
    context: ServerContext,
    listener: Listener,
    accepting: trio.Event | None = None,
    *,
    task_status: trio.TaskStatus[int],
) -> None:
    """Listen on the listener's host:port and serve every connection in this task's nursery; reports the bound
    port. With ``accepting``, connections wait in the listen backlog until it is set (the port is bound, so nobody
    mistakes the broker for a dead one). Raises StartupError naming the listener and its address when it cannot
    listen there."""
    try:
        listeners = await trio.open_tcp_listeners(listener.port, host=listener.host)
    except OSError as exc:
        raise StartupError(
            f"listener {listener.name} cannot listen on {listener.host}:{listener.port} ({exc.strerror or exc})"
        ) from None
    bound_port = listeners[0].socket.getsockname()[1]
    log.info(
        "listening",
        listener=listener.name,
        security_protocol=listener.security_protocol,
        host=listener.host,
        port=bound_port,
    )
    task_status.started(bound_port)
    sys.setswitchinterval(SWITCH_INTERVAL_S)

    connections: set[Connection] = set()

    ssl_context = context.ssl_contexts.get(listener.name)  # None: a plaintext listener

    async def handle(stream: trio.SocketStream) -> None:
        sock = NonBlockingSocket.adopt(stream) if ssl_context is None else TlsSocket.adopt_tls(stream, ssl_context)
        connection = Connection(context, sock, listener)
        connections.add(connection)
        try:
            await connection.serve()
        finally:
            connections.discard(connection)

    if accepting is not None:
        await accepting.wait()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_close_idle, connections, context.config.get_int("connections.max.idle.ms") / 1000)
        nursery.start_soon(_close_departed, connections)
        for socket_listener in listeners:
            nursery.start_soon(_accept, socket_listener, handle, nursery)


async def _accept(
    listener: trio.SocketListener, handle: Callable[[trio.SocketStream], Awaitable[None]], nursery: trio.Nursery
) -> None:
    """Accept connections and serve each in ``nursery``. When the system refuses one for want of descriptors or
    memory, retry after ``ACCEPT_RETRY_S``, logging it at most as ``_LOG_LIMIT`` allows (trio's own loop logs a
    traceback at every retry)."""
    while True:
        try:
            stream = await listener.accept()
        except OSError as exc:
            if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                raise
            _LOG_LIMIT.log(
                log.error,
                "accept_failed",
                exc.errno,
                error=errno.errorcode.get(exc.errno or 0, str(exc.errno)),
                reason=exc.strerror,
                retry_s=ACCEPT_RETRY_S,
            )
            await trio.sleep(ACCEPT_RETRY_S)
            continue
        nursery.start_soon(handle, stream)


async def _close_departed(connections: set[Connection]) -> None:
    """Every ``DEPARTED_CHECK_S``, close the connections that wait, reading nothing, for a client that has gone: one
    look at each connection's flags, and at the TCP state of those waiting (no task per connection)."""
    while True:
        await trio.sleep(DEPARTED_CHECK_S)
        for looked, connection in enumerate(list(connections), 1):
            connection.close_if_departed()
            if looked % CONNECTIONS_PER_CHECKPOINT == 0:
                await trio.lowlevel.checkpoint()


async def _close_idle(connections: set[Connection], idle_s: float) -> None:
    """Close every connection whose request count stayed the same for ``idle_s`` (checked every tenth of it)."""
    last_seen: dict[Connection, tuple[int, float]] = {}
    while True:
        await trio.sleep(idle_s / IDLE_CHECKS_PER_PERIOD)
        now = trio.current_time()
        seen = {}
        for looked, connection in enumerate(list(connections), 1):
            if looked % CONNECTIONS_PER_CHECKPOINT == 0:
                await trio.lowlevel.checkpoint()
            count, since = last_seen.get(connection, (-1, now))
            if count != connection.requests:
                since = now
            elif now - since >= idle_s:
                connection.close_idle()
            seen[connection] = (connection.requests, since)
        last_seen = seen
