"""Wire fuzzing against a live broker subprocess: hypothesis-generated requests for every advertised API and
version, valid or mutated (bit flips, truncation, lying size prefixes, counts claiming 2^31 elements, junk after
the body). The broker must never die, its RSS must stay bounded, and a bystander connection must keep being
answered throughout. The number of frames sent is printed.

More frames: ``ONCELOG_WIRE_FUZZ_EXAMPLES=20000 .venv/bin/pytest tests/torture/test_wire_fuzz_live.py -s``.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oncelog.protocol import SCHEMAS, ApiKey, decode_response, encode_request
from oncelog.protocol.records import SimpleRecord, encode_batch
from oncelog.protocol.schema import Field, Versions
from support.broker import BrokerProcess

EXAMPLES = int(os.environ.get("ONCELOG_WIRE_FUZZ_EXAMPLES", "2500"))
READ_TIMEOUT_S = 0.25
#: RSS the broker may gain over the whole run (topics the fuzzer manages to create cost memory legitimately).
MAX_RSS_GROWTH_MB = 64
TOPIC = "fuzz"
_SIZE = struct.Struct(">i")
INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
FRAMES = {"sent": 0, "closed_by_broker": 0, "answered": 0}


def _int(bits: int) -> st.SearchStrategy[int]:
    low, high = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return st.one_of(st.integers(-2, 16), st.sampled_from([low, high, -1, 0]), st.integers(low, high))


def _records() -> st.SearchStrategy[bytes]:
    record = st.builds(lambda k, v: SimpleRecord(k, v, [], 1000), st.binary(max_size=8), st.binary(max_size=32))
    return st.builds(
        lambda rs, pid, txn: encode_batch(
            rs,
            producer_id=pid,
            producer_epoch=0 if pid >= 0 else -1,
            base_sequence=0 if pid >= 0 else -1,
            transactional=txn and pid >= 0,
        ),
        st.lists(record, min_size=1, max_size=4),
        st.sampled_from([-1, -1, 0, 1, 1000]),
        st.booleans(),
    )


def _primitive(t: str, nullable: bool) -> st.SearchStrategy:
    if t in INT_RANGES:
        base = _int(INT_RANGES[t])
    elif t == "bool":
        base = st.booleans()
    elif t == "string":
        base = st.one_of(st.sampled_from([TOPIC, "", "__transaction_state", "txn", "group"]), st.text(max_size=12))
    elif t == "bytes":
        base = st.binary(max_size=48)
    elif t == "records":
        base = st.one_of(_records(), st.binary(max_size=80))
    elif t == "uuid":
        base = st.uuids()
    else:
        raise AssertionError(t)
    return st.one_of(st.none(), base) if nullable else base


def body_strategy(fields: tuple[Field, ...], version: int) -> st.SearchStrategy[dict]:
    """Valid bodies of a request at ``version``: every present field, arrays of 0-3 elements."""
    parts: dict[str, st.SearchStrategy] = {}
    for f in fields:
        if version not in Versions.parse(f.versions):
            continue
        nullable = version in Versions.parse(f.nullable)
        if f.type == "[]":
            inner: st.SearchStrategy = st.lists(body_strategy(f.children, version), max_size=3)
        elif f.type.startswith("[]"):
            inner = st.lists(_primitive(f.type[2:], False), max_size=3)
        elif f.type == "struct":
            parts[f.name] = body_strategy(f.children, version)
            continue
        else:
            parts[f.name] = _primitive(f.type, nullable)
            continue
        parts[f.name] = st.one_of(st.none(), inner) if nullable else inner
    return st.fixed_dictionaries(parts)


MUTATIONS = ("none", "flip", "truncate", "lying-size", "huge-count", "huge-varint", "junk", "splice")


@st.composite
def frames(draw: st.DrawFn, cases: list[tuple[ApiKey, int]]) -> bytes:
    """One size-prefixed request frame (possibly several concatenated), valid or mutated."""
    key, version = draw(st.sampled_from(cases))
    body = draw(body_strategy(SCHEMAS[key][0].fields, version))
    data = bytearray(encode_request(key, version, draw(_int(32)), draw(st.none() | st.text(max_size=8)), body))
    mutation = draw(st.sampled_from(MUTATIONS))
    size = len(data)
    if mutation == "flip":
        for _ in range(draw(st.integers(1, 4))):
            pos = draw(st.integers(0, len(data) - 1))
            data[pos] ^= 1 << draw(st.integers(0, 7))
    elif mutation == "truncate":
        del data[draw(st.integers(0, len(data) - 1)) :]
        size = len(data)
    elif mutation == "lying-size":
        size = draw(
            st.one_of(
                st.integers(-(1 << 31), -1),
                st.integers(0, len(data) + 64),
                st.sampled_from([(1 << 31) - 1, 100 * 1024 * 1024, 104857601]),
            )
        )
    elif mutation == "huge-count":  # an int32 array/string/bytes length claiming 2^31-1 (or -2) elements
        pos = draw(st.integers(0, max(0, len(data) - 4)))
        data[pos : pos + 4] = draw(st.sampled_from([b"\x7f\xff\xff\xff", b"\x7f\xff\xff\xfe", b"\xff\xff\xff\xfe"]))
    elif mutation == "huge-varint":  # a compact length claiming 2^32-2 elements, or an over-long varint
        pos = draw(st.integers(0, len(data)))
        data[pos:pos] = draw(st.sampled_from([b"\xff\xff\xff\xff\x0f", b"\xfe\xff\xff\xff\x07", b"\xff" * 6]))
    elif mutation == "junk":
        data += draw(st.binary(min_size=1, max_size=32))
    if mutation != "lying-size":
        size = len(data)
    frame = _SIZE.pack(size) + bytes(data)
    if mutation == "splice":  # a valid frame followed by a partial one
        frame += frame[: draw(st.integers(1, len(frame)))]
    return frame


def _send(port: int, frame: bytes) -> None:
    """Send one fuzzed frame on a fresh connection, half-close, and drain whatever the broker answers."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.settimeout(READ_TIMEOUT_S)
        try:
            sock.sendall(frame)
            sock.shutdown(socket.SHUT_WR)
            received = 0
            while chunk := sock.recv(65536):
                received += len(chunk)
            FRAMES["closed_by_broker"] += 1
            if received:
                FRAMES["answered"] += 1
        except (TimeoutError, ConnectionError):
            pass  # a long-polling fetch, or a reset: both fine
    FRAMES["sent"] += 1


class Bystander:
    """A long-lived connection that must keep getting answers while the fuzzer runs."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.correlation = 0
        self.buffer = b""

    def check(self) -> None:
        self.correlation += 1
        data = encode_request(
            ApiKey.METADATA,
            9,
            self.correlation,
            "bystander",
            {
                "topics": None,
                "allow_auto_topic_creation": False,
                "include_cluster_authorized_operations": False,
                "include_topic_authorized_operations": False,
            },
        )
        self.sock.sendall(_SIZE.pack(len(data)) + data)
        (size,) = _SIZE.unpack(self._read(4))
        response = decode_response(ApiKey.METADATA, 9, self._read(size))
        assert response.brokers, "bystander got an empty metadata answer"

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            assert chunk, "broker closed the bystander connection"
            self.buffer += chunk
        out, self.buffer = self.buffer[:n], self.buffer[n:]
        return out


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def advertised(port: int) -> list[tuple[ApiKey, int]]:
    """Every (API, version) the broker's ApiVersions v3 answer advertises."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        data = encode_request(
            ApiKey.API_VERSIONS, 3, 1, "fuzz", {"client_software_name": "fuzz", "client_software_version": "1"}
        )
        sock.sendall(_SIZE.pack(len(data)) + data)
        raw = b""
        while len(raw) < 4 or len(raw) < 4 + _SIZE.unpack_from(raw)[0]:
            raw += sock.recv(65536)
    response = decode_response(ApiKey.API_VERSIONS, 3, raw[4:])
    return [
        (ApiKey(k.api_key), v)
        for k in response.api_keys
        if k.api_key in {int(a) for a in SCHEMAS}
        for v in range(k.min_version, k.max_version + 1)
    ]


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("fuzz") / "data", settings={"socket.request.max.bytes": 1 << 20})
    proc.start()
    try:
        yield proc
    finally:
        proc.close()


def test_fuzzed_frames_never_hurt_the_broker(fuzz_broker: BrokerProcess) -> None:
    from support.topics import create_topic_confluent

    create_topic_confluent(fuzz_broker.bootstrap, TOPIC, 2)
    cases = advertised(fuzz_broker.port)
    assert len({key for key, _ in cases}) >= 15
    bystander = Bystander(fuzz_broker.port)
    warmup = 200
    baseline: list[float] = []

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
    )
    @given(frames(cases))
    def fuzz(frame: bytes) -> None:
        _send(fuzz_broker.port, frame)
        if FRAMES["sent"] == warmup:
            baseline.append(rss_mb(fuzz_broker.pid))
        if FRAMES["sent"] % 50 == 0:
            assert fuzz_broker.proc is not None and fuzz_broker.proc.poll() is None, "broker died"
            bystander.check()

    fuzz()
    assert fuzz_broker.proc is not None and fuzz_broker.proc.poll() is None, fuzz_broker.stderr_tail()
    bystander.check()
    after = rss_mb(fuzz_broker.pid)
    growth = after - (baseline[0] if baseline else after)
    print(
        f"\nwire fuzz: {FRAMES['sent']} frames over {len(cases)} (api, version) pairs; "
        f"{FRAMES['answered']} answered, {FRAMES['closed_by_broker']} closed by the broker; "
        f"RSS {after:.1f} MB ({growth:+.1f} MB after warm-up)"
    )
    assert FRAMES["sent"] >= min(EXAMPLES, 1000)
    assert growth < MAX_RSS_GROWTH_MB
    failures = [
        line
        for line in fuzz_broker.stderr_tail(1 << 22).splitlines()
        if "handler_failed" in line or "connection_failed" in line
    ]
    assert not failures, "\n".join(failures[:5])
