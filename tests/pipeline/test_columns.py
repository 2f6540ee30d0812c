"""The Spark source's and sink's bulk paths without Spark: fetched batches -> Arrow columns (compiled and pure
decoders), and murmur2 over a key column."""

from __future__ import annotations

import random
import time

import pyarrow as pa
import pytest
from oncelog.client.delay import TTL_HEADER
from oncelog.client.expiry import ExpiryFilter
from oncelog.client.fetch_parse import decode_selected, select_batches
from oncelog.client.partitioner import murmur2, partition_for_key
from oncelog.client.record_decode import columns_compiled, columns_pure
from oncelog.client.types import TopicPartition
from oncelog.pipeline.columns import to_arrow
from oncelog.pipeline.partitioning import murmur2_many, partitions_for_keys
from oncelog.pipeline.rows import ARROW_SCHEMA, records_to_batch
from oncelog.protocol.records import Compression, SimpleRecord, encode_batch

TP = TopicPartition("topic-a", 7)
DECODERS = {"pure": columns_pure, "compiled": columns_compiled}


def fetched() -> bytes:
    """Batches as a fetch returns them: plain, LogAppendTime, compressed, one with headers (a live and an expired
    TTL), one with a null key and value."""
    now = int(time.time() * 1000)
    plain = [SimpleRecord(f"k{i}".encode(), f"v{i}".encode(), (), now - 5 + i % 3) for i in range(30)]
    headed = [
        SimpleRecord(b"h0", b"live", [(TTL_HEADER, b"600000"), ("x", None)], now),
        SimpleRecord(b"h1", b"expired", [(TTL_HEADER, b"1")], now - 60_000),
        SimpleRecord(None, b"plain header", [("x", b"y")], now),
    ]
    return b"".join(
        [
            encode_batch(plain[:10], base_offset=0),
            encode_batch(plain[10:20], base_offset=10, timestamp_type=1, now_ms=now),
            encode_batch(plain[20:], base_offset=20, compression=Compression.LZ4),
            encode_batch(headed, base_offset=30),
            encode_batch([SimpleRecord(None, None, (), now), SimpleRecord(b"", b"", (), now)], base_offset=33),
        ]
    )


def expected(blob: bytes, position: int, end: int) -> pa.RecordBatch:
    """What the consumer's record path gives: decode_selected, the TTL filter, records_to_batch."""
    selected, _ = select_batches(blob, position, read_committed=False)
    records = [r for b in selected for r in decode_selected(TP, b) if r.offset < end]
    live, _ = ExpiryFilter().split(records, int(time.time() * 1000))
    return records_to_batch(live)


@pytest.mark.parametrize("decoder", sorted(DECODERS))
@pytest.mark.parametrize(("position", "end", "max_rows"), [(0, 100, 20000), (4, 25, 20000), (13, 35, 7), (0, 10, 1)])
def test_to_arrow_gives_the_record_paths_rows(decoder: str, position: int, end: int, max_rows: int) -> None:
    blob = fetched()
    selected, _ = select_batches(blob, position, read_committed=False)
    batches = list(to_arrow(TP, selected, end, expiry=ExpiryFilter(), max_rows=max_rows, decode=DECODERS[decoder]))
    assert all(b.schema == ARROW_SCHEMA and b.num_rows for b in batches)
    got = pa.Table.from_batches(batches, ARROW_SCHEMA)
    want = pa.Table.from_batches([expected(blob, position, end)], ARROW_SCHEMA)
    assert got.to_pylist() == want.to_pylist()
    if end == 100:
        values = got.column("value").to_pylist()
        assert b"live" in values and b"expired" not in values  # the batch with headers went through the TTL filter
    if max_rows == 1:
        assert len(batches) == 1  # a record batch is never split
    if max_rows == 7:  # 13-19 (7 rows: full), 20-29, the batch with headers, 33-34
        assert [b.num_rows for b in batches] == [7, 10, 2, 2]


def test_murmur2_many_matches_the_clients_murmur2() -> None:
    rng = random.Random(27)
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(40))) for _ in range(3000)]
    keys += [b"", b"a", b"ab", b"abc", b"abcd", b"abcde", "ключ".encode()]
    column = pa.array(keys, pa.binary())
    assert murmur2_many(column).tolist() == [murmur2(k) for k in keys]
    assert murmur2_many(column.slice(11, 500)).tolist() == [murmur2(k) for k in keys[11:511]]
    assert murmur2_many(pa.array(["k1", "ключ"], pa.string())).tolist() == [murmur2(b"k1"), murmur2("ключ".encode())]
    for count in (1, 2, 3, 7, 100):
        assert partitions_for_keys(column, count).tolist() == [partition_for_key(k, count) for k in keys]
    assert murmur2(b"21") == 3321034988 == murmur2_many(pa.array([b"21"])).tolist()[0]  # the Java client's value
    with pytest.raises(ValueError, match="without nulls"):
        murmur2_many(pa.array([b"k", None]))
