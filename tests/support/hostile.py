"""Raw-wire clients for the hostile-input suite and soak: exact control over what is sent and what is never read.

Requests are encoded with ``oncelog.protocol`` at fixed, non-flexible versions (Metadata v1, CreateTopics v0,
Produce v3, Fetch v4, ListOffsets v1), and crafted frames are built by hand where the codec would refuse them.
Only 127.0.0.1 brokers are contacted. Guaranteed: ``Wire.request`` returns the decoded body of the answer to the
request it sent or raises (``TimeoutError`` after ``timeout`` seconds, ``ConnectionError`` when the broker closed).
"""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from oncelog.protocol import ApiKey, decode_response, encode_request
from oncelog.protocol.records import SimpleRecord, encode_batch

HOST = "127.0.0.1"
_SIZE = struct.Struct(">i")
METADATA_VERSION = 1
FETCH_VERSION = 4
PRODUCE_VERSION = 3
LIST_OFFSETS_VERSION = 1
CREATE_TOPICS_VERSION = 0


def rss_mb(pid: int) -> float:
    """Resident memory of process ``pid`` (VmRSS), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def open_fds(pid: int) -> int:
    """Descriptors process ``pid`` holds open."""
    return len(list(Path(f"/proc/{pid}/fd").iterdir()))


def frame(api_key: int, version: int, body: dict[str, Any], correlation_id: int = 1) -> bytes:
    """A whole request frame, size prefix included."""
    data = encode_request(api_key, version, correlation_id, "hostile", body)
    return _SIZE.pack(len(data)) + data


def header_bytes(api_key: int, version: int, correlation_id: int = 1) -> bytes:
    """The request header (v1) alone, for frames whose body is built by hand."""
    client = b"hostile"
    return struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client


def metadata_of_empty_names(count: int) -> bytes:
    """A Metadata v1 frame naming the empty topic ``count`` times (2 bytes each)."""
    body = _SIZE.pack(count) + b"\x00\x00" * count
    data = header_bytes(ApiKey.METADATA, METADATA_VERSION) + body
    return _SIZE.pack(len(data)) + data


def metadata_frame(names: list[str], correlation_id: int = 1) -> bytes:
    return frame(
        ApiKey.METADATA, METADATA_VERSION, {"topics": [{"name": n} for n in names]}, correlation_id=correlation_id
    )


def fetch_body(
    topic: str,
    partitions: list[int],
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 0x7FFFFFFF,
    partition_max_bytes: int = 0x7FFFFFFF,
    offset: int = 0,
) -> dict[str, Any]:
    """A Fetch v4 body listing ``partitions`` of ``topic`` (repeats kept) from ``offset``."""
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": 0,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": p, "fetch_offset": offset, "partition_max_bytes": partition_max_bytes}
                    for p in partitions
                ],
            }
        ],
    }


def batch_of(size: int, records: int = 1) -> bytes:
    """One uncompressed batch holding about ``size`` bytes of values over ``records`` records."""
    value = b"v" * (size // records)
    return encode_batch([SimpleRecord(None, value) for _ in range(records)])


class Wire:
    """One raw connection to a broker."""

    def __init__(self, port: int, timeout: float = 30.0) -> None:
        self.sock = socket.create_connection((HOST, port), timeout=timeout)
        self.timeout = timeout
        self._correlation = 0

    def __enter__(self) -> Wire:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def read_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._read_exact(4))
        return self._read_exact(size)

    def request(self, api_key: int, version: int, body: dict[str, Any]) -> Any:
        self._correlation += 1
        self.send(frame(api_key, version, body, self._correlation))
        return self.response(api_key, version)

    def response(self, api_key: int, version: int) -> Any:
        return decode_response(api_key, version, self.read_frame())

    def closed_by_broker(self, timeout: float) -> bool:
        """True once the broker closed the connection (reads and drops anything it sends meanwhile)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(1 << 16)
            except TimeoutError:
                return False
            except ConnectionResetError:
                return True
            if not chunk:
                return True
        return False

    # Conveniences ------------------------------------------------------------------------------------------

    def create_topic(self, name: str, partitions: int = 1, configs: dict[str, str] | None = None) -> None:
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            "timeout_ms": 30000,
        }
        answer = self.request(ApiKey.CREATE_TOPICS, CREATE_TOPICS_VERSION, body)
        assert answer.topics[0].error_code == 0, answer

    def produce(self, topic: str, partition: int, records: bytes, acks: int = -1) -> int:
        """Produce one partition's records; returns the error code."""
        body = {
            "transactional_id": None,
            "acks": acks,
            "timeout_ms": 30000,
            "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
        }
        answer = self.request(ApiKey.PRODUCE, PRODUCE_VERSION, body)
        return int(answer.responses[0].partition_responses[0].error_code)

    def metadata(self, names: list[str]) -> Any:
        return self.request(ApiKey.METADATA, METADATA_VERSION, {"topics": [{"name": n} for n in names]})

    def timed_metadata(self, names: list[str]) -> float:
        """Seconds one Metadata request takes to be answered."""
        started = time.monotonic()
        self.metadata(names)
        return time.monotonic() - started
