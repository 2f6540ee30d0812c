"""TLS over a broker connection's socket, with the interface of ``socket_io.NonBlockingSocket``.

OpenSSL reads and writes the non-blocking socket itself (an ``ssl.SSLSocket``, no memory BIOs: no copies besides
decryption); like ``NonBlockingSocket``, a call enters the trio scheduler only when OpenSSL reports it would block
(``SSLWantReadError`` / ``SSLWantWriteError``), waiting for what OpenSSL needs.

Guaranteed, beyond ``NonBlockingSocket``'s contract: the server's side of the handshake runs on the first receive
(or send), inside the connection's own task, so ``server.Connection``'s idle timeout (``connections.max.idle.ms``)
bounds a client that connects and never completes it, as in Kafka, whose idle check covers handshaking channels
too. A failed handshake (garbage, a plaintext Kafka request, a client certificate that is missing while
``ssl.client.auth=required`` or not signed by the truststore) and any later TLS error raise
``trio.BrokenResourceError``, so the connection is closed and nothing else is disturbed. A receive returns at most
one TLS record's data (16 KiB); ``b""`` / 0 once the peer closed, with or without a close_notify. ``close`` sends a
close_notify when it can without waiting.

Not handled: a TLS 1.3 KeyUpdate from the client arriving while the connection's writer waits for the socket to
become writable would make both tasks wait on it (trio refuses that); the connection is then closed.
"""

from __future__ import annotations

import contextlib
import functools
import socket
import ssl
from collections.abc import Callable
from typing import TypeVar

import structlog
import trio
from oncelog.broker.socket_io import NonBlockingSocket

log = structlog.get_logger(__name__)
_T = TypeVar("_T")

#: The most plaintext one TLS record carries (RFC 8446 5.1); OpenSSL returns at most one record per read, and
#: CPython allocates a read's whole size first, so larger asks only cost.
TLS_RECORD_BYTES = 16 * 1024


class TlsSocket(NonBlockingSocket):
    """One accepted TCP connection, server side of TLS; owned: ``close`` closes it."""

    __slots__ = ("_handshaken", "_wrap_error")

    def __init__(self, sock: socket.socket, context: ssl.SSLContext) -> None:
        """Never raises for a connection the peer already dropped: the first call raises BrokenResourceError."""
        super().__init__(sock)
        self._handshaken = False
        self._wrap_error: OSError | None = None
        try:
            self._sock = context.wrap_socket(self._sock, server_side=True, do_handshake_on_connect=False)
        except OSError as exc:
            self._wrap_error = exc

    @classmethod
    def adopt_tls(cls, stream: trio.SocketStream, context: ssl.SSLContext) -> TlsSocket:
        """Take the socket out of a trio stream (accepted by ``trio.serve_listeners``); the stream is left empty."""
        return cls(socket.socket(fileno=stream.socket.detach()), context)

    async def _handshake(self) -> None:
        if self._wrap_error is not None:
            raise trio.BrokenResourceError(f"TLS error: {self._wrap_error}")
        while True:
            try:
                self._sock.do_handshake()  # type: ignore[attr-defined]
            except ssl.SSLWantReadError:
                await self._wait(trio.lowlevel.wait_readable)
            except ssl.SSLWantWriteError:
                await self._wait(trio.lowlevel.wait_writable)
            except (OSError, ValueError) as exc:
                # SSLEOFError and resets: a port probe or a client that gave up; anything else is worth a line.
                quiet = isinstance(exc, ssl.SSLEOFError) or not isinstance(exc, ssl.SSLError)
                (log.debug if quiet else log.info)("tls_handshake_failed", client=self.peer_host(), reason=str(exc))
                raise self._translate(exc) from exc
            else:
                self._handshaken = True
                return

    async def receive_some(self, max_bytes: int) -> bytes:
        if not self._handshaken:
            await self._handshake()
        return await self._retry(lambda: self._sock.recv(min(max_bytes, TLS_RECORD_BYTES)))

    async def receive_into(self, buffer: memoryview) -> int:
        if not self._handshaken:
            await self._handshake()
        return await self._retry(lambda: self._sock.recv_into(buffer))

    async def send_all(self, data: bytes) -> None:
        if not self._handshaken:
            await self._handshake()
        view = memoryview(data)
        while view:
            # An SSL_write that would block is retried with the same bytes, as OpenSSL requires.
            sent = await self._retry(functools.partial(self._sock.send, view))
            view = view[sent:]

    async def _retry(self, call: Callable[[], _T]) -> _T:
        """``call`` (one OpenSSL read or write), repeated after waiting for what OpenSSL says it needs."""
        while True:
            try:
                return call()
            except ssl.SSLWantReadError:
                await self._wait(trio.lowlevel.wait_readable)
            except ssl.SSLWantWriteError:
                await self._wait(trio.lowlevel.wait_writable)
            except (OSError, ValueError) as exc:
                raise self._translate(exc) from exc

    def _translate(self, exc: Exception) -> Exception:
        if self._sock.fileno() < 0:
            return trio.ClosedResourceError("socket was closed")
        return trio.BrokenResourceError(f"TLS error: {exc}")

    def close(self) -> None:
        """Send a close_notify if the socket takes it at once, then close as ``NonBlockingSocket.close``."""
        if self._handshaken and self._sock.fileno() >= 0:
            with contextlib.suppress(OSError, ValueError):
                self._sock.unwrap()
        super().close()
