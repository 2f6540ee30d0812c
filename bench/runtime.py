"""What the broker's runtime costs before any Kafka logic: a trio request round trip and an fsync hand-off.

These are the floors under P4's commit latency and rate, measured in the same run as the figures they explain:

- **echo**: a trio server (listeners and ``SocketStream``, as the broker uses) answering size-prefixed frames with
  the same bytes over 127.0.0.1: round-trip p50 and the server process's CPU (user + system) per request with one
  request at a time, and its CPU per request with ``CONCURRENCY`` connections each keeping one request outstanding.
- **hand-off**: the broker's own ``SyncProcess`` (the helper process that runs fdatasync off the event loop) given
  jobs with no file to sync, awaited from trio the way the flusher awaits an fsync: round-trip p50 and CPU per job
  (broker and helper together), one at a time and with ``CONCURRENCY`` jobs outstanding.

Guaranteed: the echo server process is killed and its socket closed, also on error.

Usage: python bench/runtime.py (prints both figures); ``--serve`` runs the echo server (used by ``echo``).
"""

from __future__ import annotations

import os
import selectors
import socket
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.machine import percentile
from tests.support.broker import process_cpu_seconds
from tests.support.wire import recv_exact

_SIZE = struct.Struct(">i")
#: Bytes of each echoed request (a small Kafka request, e.g. EndTxn, is 50-100 bytes).
ECHO_BYTES = 64
#: Connections (echo) or trio tasks (hand-off) kept busy at once: P4's producer processes.
CONCURRENCY = 8


@dataclass(frozen=True)
class RuntimeFigures:
    echo_rtt_p50_us: float  # one request at a time
    echo_server_cpu_us: float  # server process CPU (user + system) per request, one at a time
    echo_server_cpu_concurrent_us: float  # the same with CONCURRENCY connections busy
    handoff_p50_us: float  # one job at a time
    handoff_cpu_us: float  # CPU of the process and the helper per job, one at a time
    handoff_cpu_concurrent_us: float  # the same with CONCURRENCY jobs outstanding


def _serve() -> None:
    import trio

    async def echo(stream: trio.SocketStream) -> None:
        buffer = bytearray()
        while chunk := await stream.receive_some(65536):
            buffer += chunk
            while len(buffer) >= 4 and len(buffer) >= 4 + (size := _SIZE.unpack_from(buffer)[0]):
                frame = bytes(buffer[: 4 + size])
                del buffer[: 4 + size]
                await stream.send_all(frame)

    async def main() -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        print(listeners[0].socket.getsockname()[1], flush=True)
        await trio.serve_listeners(echo, listeners)

    trio.run(main)


def _echo_serial(sock: socket.socket, frame: bytes, requests: int) -> list[float]:
    times = []
    for _ in range(requests):
        start = time.perf_counter()
        sock.sendall(frame)
        if recv_exact(sock, len(frame)) != frame:
            raise RuntimeError("echo server answered other bytes")
        times.append(time.perf_counter() - start)
    return times


def _echo_concurrent(socks: list[socket.socket], frame: bytes, requests: int) -> None:
    """Keep one request outstanding on every socket until ``requests`` were answered in all."""
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            sock.setblocking(False)
            selector.register(sock, selectors.EVENT_READ, bytearray())
            sock.sendall(frame)
        answered = 0
        while answered < requests:
            for key, _ in selector.select():
                chunk = key.fileobj.recv(65536)  # type: ignore[union-attr]
                if not chunk:
                    raise RuntimeError("echo server closed a connection")
                buffer = key.data
                buffer += chunk
                while len(buffer) >= len(frame):
                    del buffer[: len(frame)]
                    answered += 1
                    key.fileobj.sendall(frame)  # type: ignore[union-attr]
        for sock in socks:
            selector.unregister(sock)
            sock.setblocking(True)


def echo(requests: int = 10_000, concurrency: int = CONCURRENCY) -> tuple[float, float, float]:
    """(round-trip p50 in us with one request at a time, server CPU in us per request then, server CPU in us per
    request with ``concurrency`` connections each keeping one request outstanding); each after a warm-up."""
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE, text=True)
    socks: list[socket.socket] = []
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        for _ in range(concurrency):
            socks.append(socket.create_connection(("127.0.0.1", port)))
            socks[-1].setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        frame = _SIZE.pack(ECHO_BYTES) + bytes(ECHO_BYTES)
        _echo_serial(socks[0], frame, requests // 10)
        cpu0 = process_cpu_seconds(server.pid)
        times = _echo_serial(socks[0], frame, requests)
        cpu1 = process_cpu_seconds(server.pid)
        _echo_concurrent(socks, frame, requests // 10)
        cpu2 = process_cpu_seconds(server.pid)
        _echo_concurrent(socks, frame, requests)
        cpu3 = process_cpu_seconds(server.pid)
    finally:
        for sock in socks:
            sock.close()
        server.kill()
        server.wait()
    return percentile(times, 50) * 1e6, (cpu1 - cpu0) / requests * 1e6, (cpu3 - cpu2) / requests * 1e6


def handoff(jobs: int = 10_000, concurrency: int = CONCURRENCY) -> tuple[float, float, float]:
    """(round-trip p50 in us with one job at a time, CPU of this process and the helper in us per job then, the same
    with ``concurrency`` trio tasks each keeping one job outstanding) for empty jobs through the broker's
    SyncProcess."""
    import trio
    from oncelog.broker.flusher import SYNC_THREADS
    from oncelog.broker.sync_process import SyncProcess

    def released(results: list[tuple[trio.Event, Exception | None]]) -> None:  # as the flusher's: wake the waiter
        for done, _ in results:
            done.set()

    syncer: SyncProcess[trio.Event] = SyncProcess(SYNC_THREADS, released)

    def cpu() -> float:
        assert syncer.pid is not None
        return sum(os.times()[:2]) + process_cpu_seconds(syncer.pid)

    async def round_trip() -> float:
        done = trio.Event()
        start = time.perf_counter()
        syncer.submit(done, (), full=False)
        await done.wait()
        return time.perf_counter() - start

    async def loop(count: int) -> None:
        for _ in range(count):
            await round_trip()

    async def concurrent(count: int) -> None:
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                nursery.start_soon(loop, count // concurrency)

    async def main() -> tuple[float, float, float]:
        async with trio.open_nursery() as nursery:
            await nursery.start(syncer.run)
            await loop(jobs // 10)
            cpu0 = cpu()
            times = [await round_trip() for _ in range(jobs)]
            cpu1 = cpu()
            await concurrent(jobs // 10)
            cpu2 = cpu()
            await concurrent(jobs)
            cpu3 = cpu()
            nursery.cancel_scope.cancel()
        done_jobs = jobs // concurrency * concurrency
        return percentile(times, 50) * 1e6, (cpu1 - cpu0) / jobs * 1e6, (cpu3 - cpu2) / done_jobs * 1e6

    return trio.run(main)


def measure() -> RuntimeFigures:
    return RuntimeFigures(*echo(), *handoff())


if __name__ == "__main__":
    if "--serve" in sys.argv:
        _serve()
    else:
        print(measure())
