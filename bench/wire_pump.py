"""Pipelined Produce v3 over one raw socket: writes pre-built record batches with almost no client CPU.

Used where the benchmark needs the broker's own append rate (P2) or a fast fill (P7), not a client's. A request is
framed once per distinct (topic, partition, batch); only the correlation id changes between sends. Batches without
a producer id can be sent any number of times (the broker assigns offsets; the CRC does not cover them).

Guaranteed: ``pump`` returns only after every request got its response, raises ``RuntimeError`` on any non-zero
error code or a correlation mismatch, and never has more than ``inflight`` requests outstanding.
"""

from __future__ import annotations

import socket
import struct
import time
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

API_PRODUCE = 0
PRODUCE_VERSION = 3  # non-flexible, single-batch partitions; what tests/support/wire.py speaks too
CLIENT_ID = b"oncelog-bench-pump"
ACKS_ALL = -1
TIMEOUT_MS = 30_000


def _str16(raw: bytes) -> bytes:
    return struct.pack(">h", len(raw)) + raw


def produce_body(topic: str, partition: int, batch: bytes, *, acks: int = ACKS_ALL) -> bytes:
    """The body of a Produce v3 request carrying ``batch`` for one partition (no transactional id)."""
    return (
        struct.pack(">h", -1)  # transactional_id: null
        + struct.pack(">hi", acks, TIMEOUT_MS)
        + struct.pack(">i", 1)
        + _str16(topic.encode())
        + struct.pack(">i", 1)
        + struct.pack(">ii", partition, len(batch))
        + batch
    )


def _frame(correlation: int, body: bytes) -> list[bytes]:
    header = struct.pack(">hhi", API_PRODUCE, PRODUCE_VERSION, correlation) + _str16(CLIENT_ID)
    return [struct.pack(">i", len(header) + len(body)), header, body]


def _error_codes(resp: bytes) -> Iterator[int]:
    """Partition error codes of a Produce v3 response body (after the correlation id)."""
    pos = 0
    (topics,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    for _ in range(topics):
        (name_len,) = struct.unpack_from(">h", resp, pos)
        pos += 2 + max(name_len, 0)
        (parts,) = struct.unpack_from(">i", resp, pos)
        pos += 4
        for _ in range(parts):
            _index, error, _base, _append_time = struct.unpack_from(">ihqq", resp, pos)
            pos += 26
            yield error


@dataclass(frozen=True)
class PumpResult:
    requests: int
    batch_bytes: int
    seconds: float

    @property
    def mb_per_s(self) -> float:
        """Record-batch bytes acknowledged per second, in MB (10^6 bytes)."""
        return self.batch_bytes / self.seconds / 1e6


def pump(bootstrap: str, bodies: Iterable[tuple[bytes, int]], *, inflight: int = 8) -> PumpResult:
    """Send every (request body, batch size) of ``bodies`` in order on one connection, at most ``inflight``
    unanswered; return the count, the batch bytes acknowledged and the seconds from first send to last answer."""
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    sock = socket.create_connection((host, int(port)), timeout=60)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    reader = sock.makefile("rb", buffering=1 << 16)
    outstanding: deque[int] = deque()
    sent = acked_bytes = 0
    sizes: dict[int, int] = {}

    def receive_one() -> None:
        nonlocal acked_bytes
        head = reader.read(4)
        if len(head) < 4:
            raise RuntimeError("broker closed the connection")
        (size,) = struct.unpack(">i", head)
        resp = reader.read(size)
        (corr,) = struct.unpack_from(">i", resp)
        want = outstanding.popleft()
        if corr != want:
            raise RuntimeError(f"correlation id {corr}, expected {want}")
        errors = [e for e in _error_codes(resp[4:]) if e]
        if errors:
            raise RuntimeError(f"produce request {corr} failed with error codes {errors}")
        acked_bytes += sizes.pop(corr)

    try:
        start = time.perf_counter()
        for body, batch_size in bodies:
            if len(outstanding) >= inflight:
                receive_one()
            sent += 1
            sizes[sent] = batch_size
            sock.sendall(b"".join(_frame(sent, body)))
            outstanding.append(sent)
        while outstanding:
            receive_one()
        return PumpResult(sent, acked_bytes, time.perf_counter() - start)
    finally:
        reader.close()
        sock.close()


def repeat(body: bytes, batch_size: int, count: int) -> Iterator[tuple[bytes, int]]:
    """The same request body ``count`` times (for batches without a producer id)."""
    for _ in range(count):
        yield body, batch_size
