"""What this machine can do without a broker: sequential file writes, fdatasync latency, loopback TCP.

These are the limits the broker's figures are printed beside (P2, and the fsync floor of P4/P5). All figures use
the same chunk size as the broker benchmark's batches and a file in the given directory (the broker's filesystem).

Guaranteed: every function removes the files it created and closes its sockets, also on error.
"""

from __future__ import annotations

import os
import socket
import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path

CHUNK = 1 << 20


@dataclass(frozen=True)
class DiskFigures:
    bytes_written: int
    fresh_pagecache_mb_s: float  # write() only, first pass: page-cache pages this run had not used before
    pagecache_mb_s: float  # write() only, no sync, reusing the pages freed by the previous pass
    fdatasync_end_mb_s: float  # write() all, one fdatasync at the end (dd conv=fdatasync)
    fdatasync_each_mb_s: float  # fdatasync after every CHUNK (one fsync per request, no group commit)
    fdatasync_p50_ms: float  # one 4 KiB append + fdatasync
    fdatasync_p99_ms: float
    fdatasync_cpu_us: float  # CPU (user + system) this process spent per 4 KiB append + fdatasync: the kernel's work


def _write_file(path: Path, total: int, *, sync_each: bool, sync_end: bool) -> float:
    buf = os.urandom(CHUNK)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        start = time.perf_counter()
        written = 0
        while written < total:
            written += os.write(fd, buf)
            if sync_each:
                os.fdatasync(fd)
        if sync_end:
            os.fdatasync(fd)
        return time.perf_counter() - start
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


def _sync_latencies(path: Path, count: int) -> tuple[list[float], float]:
    """Latencies of ``count`` 4 KiB appends + fdatasync, and the CPU seconds this process spent on them."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    block = os.urandom(4096)
    try:
        out = []
        cpu_start = time.process_time()
        for _ in range(count):
            t0 = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            out.append(time.perf_counter() - t0)
        return out, time.process_time() - cpu_start
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100) of a non-empty list."""
    ordered = sorted(values)
    rank = max(1, round(q / 100 * len(ordered)))
    return ordered[min(rank, len(ordered)) - 1]


def disk(directory: Path, total: int, sync_samples: int = 500) -> DiskFigures:
    """Write ``total`` bytes to a new file in ``directory`` four ways (fresh pages, then reused pages, then with
    fdatasync at the end / after every CHUNK); time ``sync_samples`` rounds of 4 KiB append + fdatasync."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "machine-bench.tmp"
    # The first pass takes pages the VM may never have touched (each costs a fault in the hypervisor); the broker's
    # growing log keeps taking such pages, so both figures matter.
    fresh = _write_file(path, total, sync_each=False, sync_end=False)
    page = _write_file(path, total, sync_each=False, sync_end=False)
    end = _write_file(path, total, sync_each=False, sync_end=True)
    each = _write_file(path, total, sync_each=True, sync_end=False)
    lat, sync_cpu_s = _sync_latencies(path, sync_samples)
    return DiskFigures(
        bytes_written=total,
        fresh_pagecache_mb_s=total / fresh / 1e6,
        pagecache_mb_s=total / page / 1e6,
        fdatasync_end_mb_s=total / end / 1e6,
        fdatasync_each_mb_s=total / each / 1e6,
        fdatasync_p50_ms=statistics.median(lat) * 1000,
        fdatasync_p99_ms=percentile(lat, 99) * 1000,
        fdatasync_cpu_us=sync_cpu_s / sync_samples * 1e6,
    )


def loopback_mb_s(total: int) -> float:
    """MB/s of ``total`` bytes pumped from one thread to another over a 127.0.0.1 TCP connection."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        port = listener.getsockname()[1]
        buf = os.urandom(CHUNK)

        def send() -> None:
            with socket.create_connection(("127.0.0.1", port)) as s:
                sent = 0
                while sent < total:
                    s.sendall(buf)
                    sent += len(buf)

        sender = threading.Thread(target=send, daemon=True)
        start = time.perf_counter()
        sender.start()
        conn, _ = listener.accept()
        with conn:
            sink = bytearray(CHUNK)
            got = 0
            while got < total:
                n = conn.recv_into(sink)
                if not n:
                    break
                got += n
        elapsed = time.perf_counter() - start
        sender.join(10)
    if got < total:
        raise RuntimeError(f"loopback: received {got} of {total} bytes")
    return total / elapsed / 1e6


#: Linux's pressure stall information for I/O: the "full" line's total is the microseconds during which every
#: non-idle task was stalled on I/O at once.
PSI_IO = Path("/proc/pressure/io")


def io_full_stall_us(text: str | None = None) -> int | None:
    """Microseconds (since boot) during which all non-idle tasks were stalled on I/O, from ``/proc/pressure/io``
    (or ``text`` in its format); None where the kernel does not report it."""
    if text is None:
        try:
            text = PSI_IO.read_text()
        except OSError:
            return None
    for line in text.splitlines():
        if line.startswith("full "):
            for field in line.split():
                if field.startswith("total="):
                    return int(field.removeprefix("total="))
    return None
