"""Hostile records against a live broker (issue #23): each case gets Kafka's error code in the Produce answer, the
broker's memory stays bounded, and a stock consumer (confluent-kafka) then reads every valid record after the refused
batches. Batches are built by hand and sent with a raw Produce v8 (per-record errors, KIP-467)."""

from __future__ import annotations

import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path

import cramjam
import crc32c
import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from support.broker import BrokerProcess
from support.topics import wait_topic_visible
from support.wire import WireClient, _varbytes, _zigzag_varint

NONE, CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD = 0, 2, 10, 87
GZIP, ZSTD = 1, 4
#: How much the broker's resident memory may grow over the whole file (its decompression budget is 16 MiB).
RSS_GROWTH_LIMIT = 150 * 1024 * 1024


def _record(offset_delta: int, key: bytes | None = b"k", value: bytes | None = b"v") -> bytes:
    body = b"\x00" + _zigzag_varint(0) + _zigzag_varint(offset_delta) + _varbytes(key) + _varbytes(value) + b"\x00"
    return _zigzag_varint(len(body)) + body


def _batch(body: bytes, count: int, codec: int = 0) -> bytes:
    """A v2 batch with a valid CRC around ``body`` (the records section as sent, compressed or not)."""
    now = int(time.time() * 1000)
    after_crc = struct.pack(">hiqqqhii", codec, count - 1, now, now, -1, -1, -1, count) + body
    return struct.pack(">qiibI", 0, 9 + len(after_crc), -1, 2, crc32c.crc32c(after_crc)) + after_crc


def _gzip(data: bytes) -> bytes:
    comp = zlib.compressobj(6, zlib.DEFLATED, 31)
    return comp.compress(data) + comp.flush()


def _zstd(data: bytes) -> bytes:
    return bytes(cramjam.zstd.compress(data))


def _zstd_rle_bomb(size: int) -> bytes:
    """A zstd frame of RLE blocks (4 bytes per 128 KiB) inflating to ``size`` bytes of 0x0c."""
    block = 128 * 1024
    blocks = size // block
    out = bytearray(struct.pack("<I", 0xFD2FB528) + bytes([0x00, 0x38]))  # no content size; 128 KiB window
    for i in range(blocks):
        out += ((block << 3) | (1 << 1) | (1 if i == blocks - 1 else 0)).to_bytes(3, "little") + b"\x0c"
    return bytes(out)


def _tiny_records(count: int) -> bytes:
    unit = _record(0, key=b"k", value=None) * 1024  # deltas 0: the only thing wrong would be the offsets
    return unit * (count // 1024)


def produce_v8(client: WireClient, topic: str, batch: bytes) -> tuple[int, list[int], str | None]:
    """Produce v8 of one batch to partition 0 -> (error code, record_errors' batch indexes, error message)."""
    body = struct.pack(">h", -1) + struct.pack(">hi", -1, 30000) + struct.pack(">i", 1)
    body += struct.pack(">h", len(topic)) + topic.encode() + struct.pack(">i", 1) + struct.pack(">ii", 0, len(batch))
    body += batch
    data = client.request(0, 8, body)
    pos = 4  # topics array count
    (name_len,) = struct.unpack_from(">h", data, pos)
    pos += 2 + name_len + 4  # name, partitions count
    _index, error, _base, _append_time, _start = struct.unpack_from(">ihqqq", data, pos)
    pos += 30
    (n_errors,) = struct.unpack_from(">i", data, pos)
    pos += 4
    indexes = []
    for _ in range(n_errors):
        index, msg_len = struct.unpack_from(">ih", data, pos)
        pos += 6 + max(msg_len, 0)
        indexes.append(index)
    (msg_len,) = struct.unpack_from(">h", data, pos)
    message = data[pos + 2 : pos + 2 + msg_len].decode() if msg_len >= 0 else None
    return error, indexes, message


def _rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


def _read_all(bootstrap: str, topic: str) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record of partition 0, read to the end by confluent-kafka."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "hostile-unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    out: list[tuple[int, bytes | None]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            messages = consumer.consume(1000, timeout=0.5)
            for m in messages:
                if m.error() is not None:
                    assert m.error().code() == KafkaError._PARTITION_EOF, m.error()
                    return out
                out.append((m.offset(), m.value()))
    finally:
        consumer.close()
    raise AssertionError(f"no end of partition {topic} in time; read {out[:10]}...")


TOPICS = {
    "plain": {},
    "compacted": {"cleanup.policy": "compact"},
    "gzipped": {"compression.type": "gzip"},
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory) -> Iterator[BrokerProcess]:
    process = BrokerProcess(tmp_path_factory.mktemp("hostile") / "data")
    try:
        process.start()
        admin = AdminClient({"bootstrap.servers": process.bootstrap})
        futures = admin.create_topics([NewTopic(name, 1, 1, config=conf) for name, conf in TOPICS.items()])
        for future in futures.values():
            future.result(timeout=15)
        for name in TOPICS:
            wait_topic_visible(admin, name, 1)
        yield process
    finally:
        process.close()


@pytest.fixture(scope="module")
def rss_start(broker: BrokerProcess) -> int:
    return _rss(broker.pid)


def _valid(value: bytes) -> bytes:
    return _batch(_record(0, value=value), 1)


def _assert_answered(broker: BrokerProcess, topic: str, batch: bytes, error: int, indexes: list[int] | None = None):
    with WireClient(broker.bootstrap, timeout=30) as client:
        assert produce_v8(client, topic, _valid(b"before"))[0] == NONE
        got, got_indexes, message = produce_v8(client, topic, batch)
        assert got == error, message
        if indexes is not None:
            assert got_indexes == indexes
        assert produce_v8(client, topic, _valid(b"after"))[0] == NONE
    assert broker.proc is not None and broker.proc.poll() is None, broker.stderr_tail()


def test_garbage_records_with_a_valid_crc(broker, rss_start) -> None:
    _assert_answered(broker, "plain", _batch(b"\x0e" + b"\xff" * 40, 1), INVALID_RECORD)
    _assert_answered(broker, "plain", _batch(_gzip(b"\x0e" + b"\xff" * 40), 1, GZIP), INVALID_RECORD)


def test_record_count_disagreeing_with_the_records(broker, rss_start) -> None:
    _assert_answered(broker, "plain", _batch(_record(0) + _record(1), 3), INVALID_RECORD)
    _assert_answered(broker, "plain", _batch(_zstd(_record(0) + _record(1) + _record(2)), 2, ZSTD), INVALID_RECORD)


def test_trailing_bytes_after_the_compressed_stream(broker, rss_start) -> None:
    _assert_answered(broker, "plain", _batch(_gzip(_record(0)) + b"\x01trailing", 1, GZIP), CORRUPT_MESSAGE)
    _assert_answered(broker, "plain", _batch(_zstd(_record(0)) + b"\x01trailing", 1, ZSTD), CORRUPT_MESSAGE)


def test_uncompressed_offset_deltas_not_in_order_are_refused(broker, rss_start) -> None:
    section = _record(0) + _record(0) + _record(0)
    _assert_answered(broker, "plain", _batch(section, 3), INVALID_RECORD, [1, 2])


def test_keyless_records_on_a_compacted_topic_list_every_index(broker, rss_start) -> None:
    section = _record(0, key=None) + _record(1) + _record(2, key=None)
    _assert_answered(broker, "compacted", _batch(section, 3), INVALID_RECORD, [0, 2])


@pytest.mark.parametrize("topic", ["plain", "gzipped"])
def test_compressed_offset_deltas_not_in_order_are_reassigned(broker, rss_start, topic: str) -> None:
    section = _record(0, value=b"a") + _record(0, value=b"b") + _record(0, value=b"c")
    with WireClient(broker.bootstrap, timeout=30) as client:
        assert produce_v8(client, topic, _batch(_zstd(section), 3, ZSTD))[0] == NONE
    values = _read_all(broker.bootstrap, topic)
    tail = values[-3:]
    assert [v for _, v in tail] == [b"a", b"b", b"c"]
    offsets = [o for o, _ in values]
    assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))


def test_gzip_bomb_is_refused_in_bounded_memory(broker, rss_start) -> None:
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = _tiny_records(64 * 1024)
    chunks = 128 * 1024 * 1024 // len(chunk)  # 128 MiB of well-formed records; only the budget stops them
    stream = b"".join(comp.compress(chunk) for _ in range(chunks)) + comp.flush()
    _assert_answered(broker, "plain", _batch(stream, chunks * 64 * 1024, GZIP), MESSAGE_TOO_LARGE)
    assert _rss(broker.pid) - rss_start < RSS_GROWTH_LIMIT


def test_zstd_bomb_is_refused_before_inflating(broker, rss_start) -> None:
    bomb = _zstd_rle_bomb(1536 * 1024 * 1024)
    assert len(bomb) < 64 * 1024
    _assert_answered(broker, "plain", _batch(bomb, 1_000_000, ZSTD), MESSAGE_TOO_LARGE)
    assert _rss(broker.pid) - rss_start < RSS_GROWTH_LIMIT


@pytest.mark.parametrize("topic", ["compacted", "gzipped"])
def test_millions_of_tiny_zstd_records_are_answered_in_bounded_memory(broker, rss_start, topic: str) -> None:
    count = 9_600_000
    request = _batch(_zstd(_tiny_records(count)), count, ZSTD)
    assert len(request) < 64 * 1024
    started = time.monotonic()
    _assert_answered(broker, topic, request, MESSAGE_TOO_LARGE)
    assert time.monotonic() - started < 20  # generous under a loaded CI machine; about 2 s alone
    assert _rss(broker.pid) - rss_start < RSS_GROWTH_LIMIT


def test_a_stock_consumer_reads_every_valid_record_after_refused_batches(broker, rss_start) -> None:
    """Runs last in the file: every 'before'/'after' record the cases above got acknowledged is readable, in
    order, with distinct offsets, and nothing of the refused batches is."""
    for topic in ("plain", "compacted", "gzipped"):
        records = _read_all(broker.bootstrap, topic)
        offsets = [o for o, _ in records]
        assert offsets == list(range(len(offsets))), topic
        refused_markers = [v for _, v in records if v not in (b"before", b"after", b"a", b"b", b"c")]
        assert refused_markers == [], topic
        assert len(records) >= 4, topic
    assert _rss(broker.pid) - rss_start < RSS_GROWTH_LIMIT
