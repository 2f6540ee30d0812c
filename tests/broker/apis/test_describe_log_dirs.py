"""DescribeLogDirs through the wire: the data dir, each partition's bytes on disk, the volume's size, and which
partitions are listed (Kafka's ReplicaManager.describeLogDirs)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from oncelog.broker.metadata import CONSUMER_OFFSETS_TOPIC
from oncelog.protocol import ApiKey, ErrorCode

from broker.helpers import batch, create_topic_body, produce_body


def _body(topics: dict[str, list[int]] | None) -> dict:
    return {"topics": None if topics is None else [{"topic": t, "partitions": p} for t, p in topics.items()]}


async def _describe(client, topics: dict[str, list[int]] | None, version: int = 4):
    response = await client.request(ApiKey.DESCRIBE_LOG_DIRS, version, _body(topics))
    assert response.error_code == ErrorCode.NONE
    assert len(response.results) == 1
    return response.results[0]


def _sizes(result) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}


def _on_disk(data_dir: Path, topic: str, partition: int) -> tuple[int, int]:
    """(bytes of the partition's .log files, how many there are)."""
    logs = list((data_dir / f"{topic}-{partition}").glob("*.log"))
    return sum(f.stat().st_size for f in logs), len(logs)


async def _produce(client, topic: str, partition: int, values: list[bytes]) -> None:
    response = await client.request(ApiKey.PRODUCE, 7, produce_body(topic, partition, batch(values)))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE


async def test_partition_sizes_are_the_segment_bytes_on_disk(start_broker, tmp_path: Path) -> None:
    broker = await start_broker(log_segment_bytes="300")  # a few batches per segment: several segments
    client = await broker.connect()
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("sized", partitions=3))
    for i in range(6):
        await _produce(client, "sized", 0, [b"value-%d" % i * 10, b"other"])
    await _produce(client, "sized", 1, [b"one"])

    result = await _describe(client, {"sized": [0, 1, 2]})
    data_dir = tmp_path / "data"
    assert (result.error_code, result.log_dir) == (ErrorCode.NONE, str(data_dir.absolute()))
    bytes_0, segments_0 = _on_disk(data_dir, "sized", 0)
    assert segments_0 > 1 and bytes_0 > 0
    assert _sizes(result) == {
        ("sized", 0): bytes_0,
        ("sized", 1): _on_disk(data_dir, "sized", 1)[0],
        ("sized", 2): 0,  # one empty segment
    }
    assert _sizes(result)[("sized", 1)] > 0
    partitions = result.topics[0].partitions
    assert [(p.offset_lag, p.is_future_key) for p in partitions] == [(0, False)] * 3

    await _produce(client, "sized", 2, [b"late"])
    assert _sizes(await _describe(client, {"sized": [2]})) == {("sized", 2): _on_disk(data_dir, "sized", 2)[0]}


async def test_volume_sizes_are_those_of_the_data_dir_filesystem(broker, client, tmp_path: Path) -> None:
    result = await _describe(client, {}, version=4)
    volume = os.statvfs(tmp_path / "data")
    assert result.total_bytes == volume.f_blocks * volume.f_frsize > 0
    assert 0 < result.usable_bytes <= volume.f_bfree * volume.f_frsize
    assert list(result.topics) == []


@pytest.mark.parametrize("version", [1, 2, 3, 4])
async def test_every_version_lists_the_partitions(client, version: int) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("each", partitions=1))
    await _produce(client, "each", 0, [b"x"])
    response = await client.request(ApiKey.DESCRIBE_LOG_DIRS, version, _body({"each": [0]}))
    assert response.error_code == ErrorCode.NONE
    (result,) = response.results
    assert _sizes(result)[("each", 0)] > 0
    if version < 4:  # no volume sizes before v4: the field's default when decoded
        assert (result.total_bytes, result.usable_bytes) == (-1, -1)
    else:
        assert result.total_bytes > 0


async def test_null_topics_lists_every_partition_internal_topics_included(broker, client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("all-a", partitions=2))
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("all-b", partitions=1))
    await client.request(ApiKey.FIND_COORDINATOR, 1, {"key": "g", "key_type": 0})  # creates __consumer_offsets

    result = await _describe(client, None)
    listed = set(_sizes(result))
    assert listed == set(broker.node.logs.all_logs())
    assert {("all-a", 0), ("all-a", 1), ("all-b", 0), (CONSUMER_OFFSETS_TOPIC, 0)} <= listed
    assert [t.name for t in result.topics] == sorted(t.name for t in result.topics)


async def test_unknown_topics_and_partitions_are_absent(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("known", partitions=2))
    result = await _describe(client, {"known": [1, 7, -1], "ghost": [0], "also-known": []})
    assert _sizes(result) == {("known", 1): 0}
    assert list((await _describe(client, {"known": [5]})).topics) == []  # a topic left with nothing is omitted


async def test_a_data_dir_that_cannot_be_examined_is_an_unknown_server_error(broker, client, monkeypatch) -> None:
    gone = broker.node.data_dir / "vanished"
    monkeypatch.setattr(broker.node, "data_dir", gone)
    result = await _describe(client, None)
    assert (result.error_code, result.log_dir, list(result.topics)) == (
        ErrorCode.UNKNOWN_SERVER_ERROR,
        str(gone.absolute()),
        [],
    )
    assert (result.total_bytes, result.usable_bytes) == (-1, -1)
