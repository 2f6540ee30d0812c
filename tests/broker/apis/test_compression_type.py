"""Broker-side compression: compression.type recompresses stored batches, and clients too old for zstd (Produce < 7,
Fetch < 10) get UNSUPPORTED_COMPRESSION_TYPE instead of zstd data (KIP-110)."""

from __future__ import annotations

from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import iter_records
from oncelog.protocol.records.batch import iter_headers
from oncelog.protocol.records.compression import Compression

from broker.helpers import batch, create_topic_body, fetch_body, produce_body


async def _create(client, name: str, **configs: str) -> None:
    body = create_topic_body(name, configs={k.replace("_", "."): v for k, v in configs.items()})
    assert (await client.request(ApiKey.CREATE_TOPICS, 5, body)).topics[0].error_code == ErrorCode.NONE


async def _produce(client, topic: str, records: bytes, version: int = 8):
    response = await client.request(ApiKey.PRODUCE, version, produce_body(topic, 0, records))
    return response.responses[0].partition_responses[0]


async def _fetch(client, topic: str, version: int = 11):
    response = await client.request(ApiKey.FETCH, version, fetch_body(topic, 0, 0))
    return response.responses[0].partitions[0]


async def test_compression_type_recompresses_what_clients_send(client) -> None:
    await _create(client, "zipped", compression_type="gzip")
    for codec in (Compression.NONE, Compression.SNAPPY, Compression.GZIP):
        assert (await _produce(client, "zipped", batch([b"a", b"b"], compression=codec))).error_code == ErrorCode.NONE
    fetched = await _fetch(client, "zipped")
    assert [h.compression for _, h in iter_headers(fetched.records, check_crc=True)] == [Compression.GZIP] * 3
    assert [(r.offset, r.value) for _, r in iter_records(fetched.records)] == list(enumerate([b"a", b"b"] * 3))


async def test_zstd_is_refused_to_produce_below_v7(client) -> None:
    await _create(client, "zstd-in")
    refused = await _produce(client, "zstd-in", batch([b"z"], compression=Compression.ZSTD), version=6)
    assert refused.error_code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    assert (await _produce(client, "zstd-in", batch([b"g"], compression=Compression.GZIP), version=6)).base_offset == 0
    assert (await _produce(client, "zstd-in", batch([b"z"], compression=Compression.ZSTD), version=7)).base_offset == 1


async def test_zstd_data_is_refused_to_fetch_below_v10(client) -> None:
    await _create(client, "zstd-out", compression_type="zstd")
    assert (await _produce(client, "zstd-out", batch([b"plain"]))).error_code == ErrorCode.NONE
    old = await _fetch(client, "zstd-out", version=9)
    assert (old.error_code, old.records or b"") == (ErrorCode.UNSUPPORTED_COMPRESSION_TYPE, b"")
    new = await _fetch(client, "zstd-out", version=10)
    assert new.error_code == ErrorCode.NONE
    assert [r.value for _, r in iter_records(new.records)] == [b"plain"]
