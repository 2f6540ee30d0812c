"""One TCP connection to one broker: framing, correlation ids, pipelining, ApiVersions negotiation.

Guarantees: requests are written whole and in order; at most ``max_in_flight`` wait for answers at a time;
responses (which Kafka sends in request order) are matched to their request by correlation id. A broken
connection, a mismatched correlation id or a timed-out request closes the connection and fails every
outstanding request with :class:`KafkaConnectionError` / :class:`KafkaTimeoutError`.
"""

from __future__ import annotations

import itertools
import ssl
import struct
from collections import deque
from collections.abc import Mapping
from typing import Any

import anyio
from anyio.abc import SocketStream, TaskGroup
from oncelog.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from oncelog.client.framing import FrameReceiver, FrameSizeError
from oncelog.client.sasl import SaslSettings, authenticate
from oncelog.client.versions import CLIENT_VERSIONS, negotiate, pick
from oncelog.protocol import ApiKey, DecodeError, ErrorCode, decode_response, encode_request

CLIENT_SOFTWARE_NAME = "oncelog-python"
CLIENT_SOFTWARE_VERSION = "0.1.0"
_SIZE = struct.Struct(">i")
# Largest response frame accepted (fetch.max.bytes default 52428800 plus headroom).
MAX_RESPONSE_BYTES = 256 * 1024 * 1024


class _Pending:
    __slots__ = ("correlation_id", "done", "error", "frame")

    def __init__(self, correlation_id: int) -> None:
        self.correlation_id = correlation_id
        self.done = anyio.Event()
        self.frame: bytes | None = None
        self.error: BaseException | None = None


class BrokerConnection:
    """A connection to ``host:port``; use :meth:`open` inside a task group, then :meth:`request`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        node_id: int = -1,
        client_id: str = "oncelog",
        max_in_flight: int = 5,  # max.in.flight.requests.per.connection, Kafka default 5
        request_timeout_ms: int = 30000,  # request.timeout.ms, Kafka default 30000
        sasl: SaslSettings | None = None,
        ssl_context: ssl.SSLContext | None = None,  # security.protocol=SSL (client.security)
    ) -> None:
        self.host = host
        self.ssl_context = ssl_context
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.versions: dict[ApiKey, int] = {}
        self.broker_versions: dict[int, tuple[int, int]] = {}
        self._max_in_flight = max_in_flight
        self._slots = anyio.Semaphore(max_in_flight)
        self._write_lock = anyio.Lock()
        self._ids = itertools.count(1)
        self._pending: deque[_Pending] = deque()
        self._stream: SocketStream | None = None
        self._closed = False
        self._reader_scope: anyio.CancelScope | None = None
        self._sasl = sasl

    @property
    def connected(self) -> bool:
        return self._stream is not None and not self._closed

    def __repr__(self) -> str:
        return f"BrokerConnection(node={self.node_id}, {self.host}:{self.port})"

    async def open(self, task_group: TaskGroup, *, timeout_s: float | None = None) -> None:
        """Connect, start the response reader in ``task_group``, negotiate API versions and, with SASL settings,
        authenticate (``client.sasl``)."""
        timeout = timeout_s if timeout_s is not None else self.request_timeout_ms / 1000
        try:
            with anyio.fail_after(timeout):
                if self.ssl_context is None:
                    self._stream = await anyio.connect_tcp(self.host, self.port)
                else:
                    # Not "standard compatible": closing skips the close_notify exchange, whose read would race
                    # the reader task for the socket (Kafka's frames carry their own lengths, so a truncated
                    # stream is still detected).
                    self._stream = await anyio.connect_tcp(  # type: ignore[assignment]
                        self.host,
                        self.port,
                        ssl_context=self.ssl_context,
                        tls_hostname=self.host,
                        tls_standard_compatible=False,
                    )
        except (OSError, TimeoutError, anyio.BrokenResourceError) as exc:
            self._closed = True
            raise KafkaConnectionError(f"cannot connect to {self.host}:{self.port}: {exc}") from None
        await task_group.start(self._reader)
        try:
            await self._negotiate()
            if self._sasl is not None:
                await authenticate(self, self._sasl)
        except BaseException:
            await self.aclose()
            raise

    async def _negotiate(self) -> None:
        version = CLIENT_VERSIONS[ApiKey.API_VERSIONS][1]
        body = {"client_software_name": CLIENT_SOFTWARE_NAME, "client_software_version": CLIENT_SOFTWARE_VERSION}
        for _ in range(2):
            frame = await self.send_raw(ApiKey.API_VERSIONS, version, body)
            try:
                resp = decode_response(ApiKey.API_VERSIONS, version, frame)
            except DecodeError:
                resp = decode_response(ApiKey.API_VERSIONS, 0, frame)  # KIP-511: the error answer is v0
            if resp.error_code == ErrorCode.UNSUPPORTED_VERSION:
                ours = next((k for k in resp.api_keys if k.api_key == ApiKey.API_VERSIONS), None)
                if ours is None:
                    break
                version = min(version, ours.max_version)
                continue
            if resp.error_code:
                raise error_for(resp.error_code, "ApiVersions")
            self.broker_versions = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
            self.versions = negotiate(self.broker_versions)
            return
        raise error_for(ErrorCode.UNSUPPORTED_VERSION, "ApiVersions negotiation failed")

    def supports(self, key: ApiKey, min_version: int = 0) -> bool:
        """True when ``key`` was negotiated at ``min_version`` or above."""
        return self.versions.get(key, -1) >= min_version

    async def request(
        self,
        key: ApiKey,
        body: Mapping[str, Any],
        *,
        version: int | None = None,
        expect_response: bool = True,
        timeout_ms: int | None = None,
    ) -> Any:
        """Send one request at the negotiated (or given) version and return the decoded response body.

        ``timeout_ms`` overrides request.timeout.ms for this request (JoinGroup waits for a whole rebalance)."""
        if version is None:
            version = pick(self.versions, key)
        frame = await self.send_raw(key, version, body, expect_response=expect_response, timeout_ms=timeout_ms)
        if frame is None:
            return None
        return self.decode(key, version, frame)

    async def send_raw(
        self,
        key: ApiKey,
        version: int,
        body: Mapping[str, Any],
        *,
        expect_response: bool = True,
        timeout_ms: int | None = None,
    ) -> bytes | None:
        """Send a request; return the raw response frame (header included), or None without a response."""
        pending = await self.submit(key, version, body, expect_response=expect_response)
        if pending is None:
            return None
        return await self.wait(pending, timeout_ms=timeout_ms)

    async def submit(
        self, key: ApiKey, version: int, body: Mapping[str, Any], *, expect_response: bool = True
    ) -> _Pending | None:
        """Write a request (taking an in-flight slot); returns the handle :meth:`wait` takes, None without a
        response. Requests submitted one after another by one task go out in that order."""
        if not self.connected:
            raise KafkaConnectionError(f"{self!r} is closed")
        await self._slots.acquire()
        try:
            correlation_id = next(self._ids) & 0x7FFFFFFF
            data = encode_request(key, version, correlation_id, self.client_id, body)
            pending = _Pending(correlation_id) if expect_response else None
            async with self._write_lock:
                stream = self._stream
                if stream is None or self._closed:
                    raise KafkaConnectionError(f"{self!r} is closed")
                if pending is not None:
                    self._pending.append(pending)
                try:
                    await stream.send(_SIZE.pack(len(data)) + data)
                except (OSError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
                    await self._fail(KafkaConnectionError(f"{self!r}: send failed: {exc}"))
                    raise KafkaConnectionError(f"{self!r}: send failed: {exc}") from None
        except BaseException:
            self._slots.release()
            raise
        if pending is None:
            self._slots.release()
        return pending

    async def wait(self, pending: _Pending, *, timeout_ms: int | None = None) -> bytes:
        """The response frame of a submitted request (releases its in-flight slot)."""
        try:
            limit_ms = timeout_ms if timeout_ms is not None else self.request_timeout_ms
            with anyio.move_on_after(limit_ms / 1000) as scope:
                await pending.done.wait()
            if scope.cancelled_caught:
                await self._fail(KafkaTimeoutError(f"{self!r}: no response in {limit_ms} ms"))
            if pending.error is not None:
                raise pending.error
            assert pending.frame is not None
            return pending.frame
        finally:
            self._slots.release()

    def decode(self, key: ApiKey, version: int, frame: bytes) -> Any:
        """Decode a response frame of ``key``/``version``; an undecodable one raises KafkaError."""
        try:
            return decode_response(key, version, frame)
        except DecodeError as exc:
            raise KafkaError(
                f"{self!r}: undecodable {key.name} v{version} response: {exc}", ErrorCode.UNKNOWN_SERVER_ERROR
            ) from None

    async def _reader(self, *, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.CancelScope() as scope:
            self._reader_scope = scope
            task_status.started()
            assert self._stream is not None
            receiver = FrameReceiver(self._stream, MAX_RESPONSE_BYTES)
            try:
                while True:
                    try:
                        frame = await receiver.next()
                    except FrameSizeError as exc:
                        raise KafkaConnectionError(f"{self!r}: bad response size: {exc}") from None
                    if len(frame) < _SIZE.size:
                        raise KafkaConnectionError(f"{self!r}: bad response size {len(frame)}")
                    if not self._pending:
                        raise KafkaConnectionError(f"{self!r}: response without a request")
                    pending = self._pending[0]
                    correlation_id = _SIZE.unpack_from(frame)[0]
                    if correlation_id != pending.correlation_id:
                        raise KafkaConnectionError(
                            f"{self!r}: correlation id {correlation_id}, expected {pending.correlation_id}"
                        )
                    self._pending.popleft()
                    pending.frame = frame
                    pending.done.set()
            except (
                anyio.EndOfStream,
                anyio.IncompleteRead,
                anyio.BrokenResourceError,
                anyio.ClosedResourceError,
                OSError,
            ) as exc:
                await self._fail(KafkaConnectionError(f"{self!r}: connection lost ({type(exc).__name__})"))
            except KafkaConnectionError as exc:
                await self._fail(exc)

    async def _fail(self, error: BaseException) -> None:
        """Close the connection and fail every outstanding request with ``error``."""
        self._closed = True
        while self._pending:
            pending = self._pending.popleft()
            pending.error = error
            pending.done.set()
        stream, self._stream = self._stream, None
        if stream is not None:
            with anyio.CancelScope(shield=True):
                await stream.aclose()
        if self._reader_scope is not None:
            self._reader_scope.cancel()

    async def aclose(self) -> None:
        """Close; outstanding requests fail with KafkaConnectionError."""
        await self._fail(KafkaConnectionError(f"{self!r} closed"))
