"""A tiny hand-written Kafka wire client for tests that need exact control over bytes.

Deliberately independent of ``oncelog.protocol``: it encodes the handful of non-flexible request versions the
idempotence tests need (InitProducerId v1, Produce v3, ListOffsets v1) and one v2 record batch, using only
``struct`` and crc32c (plus header offsets/flags from ``oncelog.protocol.records.batch``, which are constants
from the Kafka spec). Only 127.0.0.1 / localhost brokers are contacted.

Guaranteed: every request is answered or a ``TimeoutError`` is raised after ``timeout`` seconds; the response
correlation id is checked.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass
from types import TracebackType

import crc32c
from oncelog.protocol.records.batch import CRC_POS, MAGIC_V2

API_PRODUCE = 0
API_LIST_OFFSETS = 2
API_INIT_PRODUCER_ID = 22

ERROR_NONE = 0
ERROR_OUT_OF_ORDER_SEQUENCE_NUMBER = 45
ERROR_DUPLICATE_SEQUENCE_NUMBER = 46
ERROR_INVALID_PRODUCER_EPOCH = 47

LATEST_TIMESTAMP = -1  # ListOffsets: -1 = latest (high watermark / LSO), -2 = earliest
EARLIEST_TIMESTAMP = -2


def _string(s: str | None) -> bytes:
    if s is None:
        return struct.pack(">h", -1)
    raw = s.encode()
    return struct.pack(">h", len(raw)) + raw


def _zigzag_varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _varbytes(b: bytes | None) -> bytes:
    if b is None:
        return _zigzag_varint(-1)
    return _zigzag_varint(len(b)) + b


@dataclass(frozen=True)
class Record:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


def encode_batch(
    records: list[Record],
    *,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    base_timestamp: int = 0,
    base_offset: int = 0,
) -> bytes:
    """One uncompressed v2 RecordBatch holding ``records`` (timestamp delta 0, offset deltas 0..n-1)."""
    body = bytearray()
    for i, rec in enumerate(records):
        r = bytearray(b"\x00")  # record attributes
        r += _zigzag_varint(0)  # timestamp delta
        r += _zigzag_varint(i)  # offset delta
        r += _varbytes(rec.key) + _varbytes(rec.value)
        r += _zigzag_varint(len(rec.headers))
        for hk, hv in rec.headers:
            r += _varbytes(hk.encode()) + _varbytes(hv)
        body += _zigzag_varint(len(r)) + r
    after_crc = (
        struct.pack(
            ">hiqqqhii",
            0,  # attributes: no compression, CreateTime, not transactional
            len(records) - 1,  # lastOffsetDelta
            base_timestamp,
            base_timestamp,  # maxTimestamp
            producer_id,
            producer_epoch,
            base_sequence,
            len(records),
        )
        + body
    )
    crc = crc32c.crc32c(after_crc)
    head = struct.pack(">qiibI", base_offset, 4 + 1 + 4 + len(after_crc), -1, MAGIC_V2, crc)
    batch = head + after_crc
    assert len(head) == CRC_POS + 4
    return batch


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, fmt: str) -> tuple[int, ...]:
        vals = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += struct.calcsize(fmt)
        return vals

    def int16(self) -> int:
        return self.take(">h")[0]

    def int32(self) -> int:
        return self.take(">i")[0]

    def int64(self) -> int:
        return self.take(">q")[0]

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s


@dataclass(frozen=True)
class PartitionProduceResult:
    error_code: int
    base_offset: int
    log_append_time_ms: int


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """Exactly ``n`` bytes from a blocking socket; ConnectionError if the peer closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError(f"peer closed the connection after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


class WireClient:
    """A blocking connection speaking request header v1 / response header v0."""

    def __init__(self, bootstrap: str, *, timeout: float = 10.0, client_id: str = "oncelog-wire-test") -> None:
        host, _, port = bootstrap.split(",")[0].rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.settimeout(timeout)
        self.client_id = client_id
        self._correlation = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        try:
            return recv_exact(self.sock, n)
        except TimeoutError:
            raise TimeoutError("no response from broker in time") from None

    def request(self, api_key: int, api_version: int, body: bytes) -> bytes:
        """Send one request and return the response body (after the correlation id)."""
        self._correlation += 1
        header = struct.pack(">hhi", api_key, api_version, self._correlation) + _string(self.client_id)
        msg = header + body
        self.sock.sendall(struct.pack(">i", len(msg)) + msg)
        size = struct.unpack(">i", self._recv_exact(4))[0]
        resp = self._recv_exact(size)
        corr = struct.unpack_from(">i", resp)[0]
        if corr != self._correlation:
            raise AssertionError(f"correlation id {corr} != {self._correlation}")
        return resp[4:]

    def init_producer_id(self) -> tuple[int, int, int]:
        """InitProducerId v1 for an idempotent (non-transactional) producer -> (error, producer id, epoch)."""
        body = _string(None) + struct.pack(">i", 60000)
        r = _Reader(self.request(API_INIT_PRODUCER_ID, 1, body))
        _throttle, error, pid, epoch = r.take(">ihqh")
        return error, pid, epoch

    def produce(
        self, topic: str, partition: int, batch: bytes, *, acks: int = -1, timeout_ms: int = 10000
    ) -> PartitionProduceResult:
        """Produce v3 of one batch to one partition; returns that partition's result."""
        body = (
            _string(None)
            + struct.pack(">hi", acks, timeout_ms)
            + struct.pack(">i", 1)
            + _string(topic)
            + struct.pack(">i", 1)
            + struct.pack(">ii", partition, len(batch))
            + batch
        )
        r = _Reader(self.request(API_PRODUCE, 3, body))
        results = []
        for _ in range(r.int32()):
            name = r.string()
            for _ in range(r.int32()):
                index, error, base_offset, append_time = r.take(">ihqq")
                results.append((name, index, PartitionProduceResult(error, base_offset, append_time)))
        if len(results) != 1 or results[0][:2] != (topic, partition):
            raise AssertionError(f"unexpected produce response partitions: {results}")
        return results[0][2]

    def list_offset(self, topic: str, partition: int, timestamp: int = LATEST_TIMESTAMP) -> tuple[int, int]:
        """ListOffsets v1 for one partition -> (error code, offset)."""
        body = struct.pack(">i", -1) + struct.pack(">i", 1) + _string(topic) + struct.pack(">i", 1)
        body += struct.pack(">iq", partition, timestamp)
        r = _Reader(self.request(API_LIST_OFFSETS, 1, body))
        found = []
        for _ in range(r.int32()):
            name = r.string()
            for _ in range(r.int32()):
                index, error, _ts, offset = r.take(">ihqq")
                found.append((name, index, error, offset))
        if len(found) != 1 or found[0][:2] != (topic, partition):
            raise AssertionError(f"unexpected list offsets response: {found}")
        return found[0][2], found[0][3]
