"""Network partitions on loopback: TCP proxies the test can cut and heal, one in front of each broker's inter-broker
listener and one between each broker and etcd.

Every connection through a proxy has a source node and a destination node. A broker's etcd proxy knows both (the
broker, and etcd). A broker's inter-broker proxy knows its destination and finds the source by asking the kernel
which broker process owns the connecting socket (``/proc/net/tcp`` gives the socket's inode, ``/proc/<pid>/fd`` the
process holding it), since every broker connects from 127.0.0.1.

``isolate(node)`` drops, from that moment, every byte between ``node`` and any other node: open connections stop
forwarding (their bytes are read and thrown away, as packets lost on a cut link), and new ones are accepted and
never connected further (a handshake whose peer never answers). ``heal(node)`` lets new connections through and
closes the ones that lost bytes (a TCP stream cannot resume after a gap), so both ends reconnect. With
``outbound=True`` the node may still open connections to the other brokers (an asymmetric partition: it can reach
them, nothing reaches it, it has no etcd). Clients reach brokers directly, not through these proxies: a client on
the isolated broker's side keeps talking to it, as Jepsen's clients do.

The proxies run on an asyncio loop in one daemon thread; the methods are called from the test's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from .ports import connected_inode, socket_inodes

HOST = "127.0.0.1"
#: The destination of an etcd proxy's connections (any id no broker has).
ETCD = 0
CHUNK = 65536


@dataclass
class _Link:
    source: int | None
    destination: int
    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    #: Set once bytes were dropped: the link is closed on heal.
    broken: bool = False


def _owner(inode: int, pids: dict[int, int]) -> int | None:
    """The node whose process holds socket ``inode``."""
    return next((node for node, pid in pids.items() if inode in socket_inodes(pid)), None)


class Network:
    """The proxies of one cluster and which nodes are cut off."""

    def __init__(self, node_pids: Callable[[], dict[int, int]]) -> None:
        """``node_pids()`` maps each running broker's node id to its process id."""
        self._node_pids = node_pids
        self._isolated: dict[int, bool] = {}  # node -> may open connections to brokers (outbound)
        self._links: list[_Link] = []
        self._servers: list[asyncio.AbstractServer] = []
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="netproxy", daemon=True)
        self._thread.start()

    def _call(self, fn: Callable[[], object]) -> object:
        async def run() -> object:
            result = fn()
            return await result if asyncio.iscoroutine(result) else result

        return asyncio.run_coroutine_threadsafe(run(), self._loop).result(10)

    def proxy_to_broker(self, node: int, port: int) -> int:
        """A proxy in front of ``node``'s inter-broker listener at ``port``; returns the proxy's port."""
        return self._start(lambda peer: self._source_of(peer), node, port)

    def proxy_to_etcd(self, node: int, port: int) -> int:
        """A proxy from ``node`` to etcd's client port ``port``; returns the proxy's port (``node`` uses it alone)."""
        return self._start(lambda peer: node, ETCD, port)

    def _start(self, source_of: Callable[[tuple[str, int, int]], int | None], destination: int, port: int) -> int:
        async def start() -> int:
            async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
                peer = writer.get_extra_info("peername")
                listen_port = writer.get_extra_info("sockname")[1]
                await self._serve(reader, writer, _Link(source_of((*peer, listen_port)), destination), port)

            server = await asyncio.start_server(handle, HOST, 0)
            self._servers.append(server)
            return server.sockets[0].getsockname()[1]

        return self._call(start)  # type: ignore[return-value]

    def _source_of(self, peer: tuple[str, int, int]) -> int | None:
        inode = connected_inode(peer[1], peer[2])
        return _owner(inode, self._node_pids()) if inode is not None else None

    def _cut(self, link: _Link) -> bool:
        if link.destination in self._isolated:
            return True
        if link.source is None or link.source not in self._isolated:
            return False
        return not (self._isolated[link.source] and link.destination != ETCD)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link, port: int) -> None:
        link.writers.append(writer)
        self._links.append(link)
        try:
            if self._cut(link):
                link.broken = True
                while await reader.read(CHUNK):
                    pass  # nothing answers; closed on heal
                return
            try:
                up_reader, up_writer = await asyncio.open_connection(HOST, port)
            except OSError:
                return
            link.writers.append(up_writer)
            async with asyncio.TaskGroup() as tasks:
                tasks.create_task(self._pump(reader, up_writer, link))
                tasks.create_task(self._pump(up_reader, writer, link))
        except (OSError, ExceptionGroup):
            pass
        finally:
            self._close(link)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, link: _Link) -> None:
        try:
            while data := await reader.read(CHUNK):
                if link.broken or self._cut(link):
                    link.broken = True
                    continue
                writer.write(data)
                await writer.drain()
        finally:
            if not link.broken:
                self._close(link)

    def _close(self, link: _Link) -> None:
        for writer in link.writers:
            writer.transport.abort()
        with contextlib.suppress(ValueError):
            self._links.remove(link)

    def isolate(self, node: int, *, outbound: bool = False) -> None:
        """Cut ``node`` off from every other broker and from etcd (``outbound``: it may still open connections to
        brokers)."""

        def cut() -> None:
            self._isolated[node] = outbound
            for link in self._links:
                if self._cut(link):
                    link.broken = True

        self._call(cut)

    def heal(self, node: int | None = None) -> None:
        """Reconnect ``node`` (None: every node); connections that lost bytes are closed."""

        def heal() -> None:
            for isolated in [node] if node is not None else list(self._isolated):
                self._isolated.pop(isolated, None)
            for link in list(self._links):
                if link.broken and not self._cut(link):
                    self._close(link)

        self._call(heal)

    @property
    def isolated(self) -> set[int]:
        return set(self._isolated)

    def close(self) -> None:
        def close() -> None:
            for server in self._servers:
                server.close()
            for link in list(self._links):
                self._close(link)

        self._call(close)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()
