"""Socket I/O for the broker's connections that enters the trio scheduler only when the socket would block.

trio's ``SocketStream`` yields to the scheduler on every call, even when the kernel has the bytes ready; a small
request then costs several scheduler passes (each an ``epoll_wait``). ``NonBlockingSocket`` tries the system call
first and waits with ``trio.lowlevel.wait_readable`` / ``wait_writable`` only when it would block, so a request that
arrives whole and whose response fits the socket buffer is read, handled and answered in one pass.

Guaranteed: ``receive_some`` returns at least one byte, or ``b""`` once the peer closed its side (``receive_into``
likewise fills at least one byte, or returns 0); ``send_all``
returns once every byte is in the kernel's send buffer; both raise ``trio.BrokenResourceError`` when the peer reset
the connection and ``trio.ClosedResourceError`` after ``close``. They are checkpoints only when they wait, so callers
that may loop without waiting must checkpoint themselves (``broker.server.Connection`` does); the one exception is a
``send_all`` of more than ``SEND_SLICE_BYTES``, which hands the bytes to the kernel a slice at a time and lets the
other tasks run between slices (a multi-megabyte response in one ``send`` holds the event loop for milliseconds).
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable

import trio

_Wait = Callable[[socket.socket], Awaitable[None]]
#: How often ``wait_peer_gone`` looks at a TCP connection's state while the peer's bytes wait unread.
PEER_GONE_POLL_S = 0.5
#: Linux's TCP states (first byte of ``struct tcp_info``) after the peer closed (CLOSE_WAIT, LAST_ACK) or reset
#: (CLOSE) the connection.
_TCP_PEER_GONE_STATES = frozenset({7, 8, 9})
#: The most ``send_all`` hands to the kernel in one system call; between two slices the other tasks may run.
SEND_SLICE_BYTES = 256 * 1024


class NonBlockingSocket:
    """One connected stream socket, owned: ``close`` closes it."""

    __slots__ = ("_sock", "waits")

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        if sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock = sock
        #: How many times a call had to wait for the socket (each wait is a trio checkpoint).
        self.waits = 0

    @classmethod
    def adopt(cls, stream: trio.SocketStream) -> NonBlockingSocket:
        """Take the socket out of a trio stream (as accepted by ``trio.serve_listeners``); the stream is left empty."""
        return cls(socket.socket(fileno=stream.socket.detach()))

    def peer_host(self) -> str:
        """The peer's address without the port ("local" for a Unix socket, "?" once disconnected)."""
        try:
            peer = self._sock.getpeername()
        except OSError:
            return "?"
        return str(peer[0]) if isinstance(peer, tuple) else "local"

    async def receive_some(self, max_bytes: int) -> bytes:
        while True:
            try:
                return self._sock.recv(max_bytes)
            except (BlockingIOError, InterruptedError):
                await self._wait(trio.lowlevel.wait_readable)
            except OSError as exc:
                raise self._translate(exc) from exc

    async def receive_into(self, buffer: memoryview) -> int:
        """Receive into ``buffer``: at least one byte, or 0 once the peer closed its side."""
        while True:
            try:
                return self._sock.recv_into(buffer)
            except (BlockingIOError, InterruptedError):
                await self._wait(trio.lowlevel.wait_readable)
            except OSError as exc:
                raise self._translate(exc) from exc

    async def send_all(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = self._sock.send(view[:SEND_SLICE_BYTES])
            except (BlockingIOError, InterruptedError):
                await self._wait(trio.lowlevel.wait_writable)
                continue
            except OSError as exc:
                raise self._translate(exc) from exc
            view = view[sent:]
            if sent == SEND_SLICE_BYTES and view:
                await trio.lowlevel.checkpoint()

    async def wait_peer_gone(self) -> None:
        """Return once the peer has closed its side of the connection or reset it. For a task that watches a
        connection whose reader is busy (no other task may be waiting for the socket to become readable meanwhile).
        Bytes the peer sent are left unread: behind them a TCP connection's state tells whether the peer has gone
        (checked every ``PEER_GONE_POLL_S``), another stream socket's is only seen once they are read."""
        await trio.lowlevel.wait_readable(self._sock)
        while True:
            gone = self._tcp_peer_gone()
            if gone is None:
                try:
                    gone = not socket.socket.recv(self._sock, 1, socket.MSG_PEEK)
                except (BlockingIOError, InterruptedError):
                    gone = False
                except OSError:
                    gone = True
                if not gone:
                    await trio.sleep_forever()
            if gone:
                return
            await trio.sleep(PEER_GONE_POLL_S)

    def peer_gone(self) -> bool:
        """Whether the peer has visibly closed or reset a TCP connection (never waits; False for other sockets)."""
        return self._sock.fileno() < 0 or bool(self._tcp_peer_gone())

    def _tcp_peer_gone(self) -> bool | None:
        """Whether the TCP connection was closed or reset by the peer; None when the socket is not TCP."""
        try:
            info = self._sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 1)
        except (OSError, AttributeError):
            return None
        return info[0] in _TCP_PEER_GONE_STATES

    async def _wait(self, wait: _Wait) -> None:
        if self._sock.fileno() < 0:
            raise trio.ClosedResourceError("socket was closed")
        self.waits += 1
        await wait(self._sock)

    def _translate(self, exc: OSError) -> Exception:
        if self._sock.fileno() < 0:
            return trio.ClosedResourceError("socket was closed")
        return trio.BrokenResourceError(f"socket error: {exc}")

    def close(self) -> None:
        """Close the socket, waking any task waiting on it with ``trio.ClosedResourceError``."""
        if self._sock.fileno() >= 0:
            trio.lowlevel.notify_closing(self._sock)
        self._sock.close()
