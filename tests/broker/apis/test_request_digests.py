"""The merging of repeated listings that the worker thread decoding a large request runs before the handler
(``apis.DIGESTS``): Fetch's (``apis.fetch.merge_listings``) must give the handler exactly what it would have merged
itself (Kafka's LinkedHashMap of partitions: the first listing's place, the later listing's position), each topic
once; Metadata's (``apis.metadata.merge_listings``) each name and id once in first-listed order, and v10-11
requests whole (one misusing ids is refused listing by listing)."""

from __future__ import annotations

import uuid

import pytest
from oncelog.broker.apis import metadata
from oncelog.broker.apis.fetch import MIN_TOPIC_ID_VERSION, merge_listings, requested_partitions
from oncelog.broker.server import THREAD_DECODE_BYTES, _decode_and_digest
from oncelog.protocol import ApiKey, decode_request, decode_request_header, encode_request


def _partition(index: int, offset: int) -> dict:
    return {
        "partition": index,
        "current_leader_epoch": -1,
        "fetch_offset": offset,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 1 << 20,
    }


def _decoded(version: int, topics: list[tuple[object, list[tuple[int, int]]]]):
    key = "topic_id" if version >= MIN_TOPIC_ID_VERSION else "topic"
    body = {
        "replica_id": -1,
        "max_wait_ms": 500,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{key: name, "partitions": [_partition(i, o) for i, o in parts]} for name, parts in topics],
        "forgotten_topics_data": [],
        "rack_id": "",
    }
    frame = encode_request(ApiKey.FETCH, version, 7, "test", body)
    return decode_request(decode_request_header(frame), frame)


def _listing(body, key: str) -> list[tuple[object, list[tuple[int, int]]]]:
    return [(t[key], [(p["partition"], p["fetch_offset"]) for p in t["partitions"]]) for t in body.topics]


@pytest.mark.parametrize("version", [12, 13])
def test_merged_listing_is_each_topic_and_partition_once_in_first_place_with_the_last_position(version: int) -> None:
    a, b = ("a", "b") if version < MIN_TOPIC_ID_VERSION else (uuid.uuid4(), uuid.uuid4())
    key = "topic_id" if version >= MIN_TOPIC_ID_VERSION else "topic"
    topics = [(a, [(0, 1), (1, 5), (0, 2)]), (b, [(3, 9)]), (a, [(2, 7), (1, 6)]), (b, [(3, 10)] * 1000)]
    body = _decoded(version, topics)
    merge_listings(version, body)
    assert _listing(body, key) == [(a, [(0, 2), (1, 6), (2, 7)]), (b, [(3, 10)])]


def test_the_handler_merges_a_merged_listing_to_the_same_partitions() -> None:
    topics = [("a", [(0, 1), (1, 5), (0, 2)]), ("a", [(2, 7)] * 5000)]
    expected = {
        t: {i: p["fetch_offset"] for i, p in parts.items()}
        for t, parts in requested_partitions(_decoded(12, topics)).items()
    }
    body = _decoded(12, topics)
    merge_listings(12, body)
    got = {t: {i: p["fetch_offset"] for i, p in parts.items()} for t, parts in requested_partitions(body).items()}
    assert got == expected == {"a": {0: 2, 1: 5, 2: 7}}
    assert sum(len(t["partitions"]) for t in body.topics) == 3


def test_a_large_fetch_decoded_in_the_worker_thread_comes_out_merged() -> None:
    body = _decoded(12, [("a", [(0, 1)] * 20_000)])
    frame = encode_request(ApiKey.FETCH, 12, 7, "test", dict(body))
    assert len(frame) >= THREAD_DECODE_BYTES
    digested = _decode_and_digest(decode_request_header(frame), frame)
    assert _listing(digested, "topic") == [("a", [(0, 1)])]


def _metadata(version: int, topics: list[tuple[str | None, uuid.UUID | None]]):
    listings = [
        {"name": name, **({"topic_id": topic_id or uuid.UUID(int=0)} if version >= 10 else {})}
        for name, topic_id in topics
    ]
    body = {"topics": listings, "allow_auto_topic_creation": False}
    if version >= 8:
        body |= {"include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
    frame = encode_request(ApiKey.METADATA, version, 7, "test", body)
    return decode_request(decode_request_header(frame), frame)


def test_metadata_listings_are_merged_to_each_name_once_in_first_order() -> None:
    body = _metadata(1, [("b", None), ("a", None), ("b", None)] + [("", None)] * 90_000 + [("a", None)])
    metadata.merge_listings(1, body)
    assert [t["name"] for t in body.topics] == ["b", "a", ""]


def test_metadata_listings_by_id_are_merged_to_each_name_and_id_once() -> None:
    one, two = uuid.uuid4(), uuid.uuid4()
    body = _metadata(12, [(None, one), ("a", None), (None, two), (None, one), ("a", None)])
    metadata.merge_listings(12, body)
    assert [(t["name"], t["topic_id"]) for t in body.topics] == [(None, one), ("a", uuid.UUID(int=0)), (None, two)]


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_v10_v11_listings_are_left_whole(version: int) -> None:
    body = _metadata(version, [("a", None), ("a", None), (None, uuid.uuid4())])
    metadata.merge_listings(version, body)
    assert len(body.topics) == 3
