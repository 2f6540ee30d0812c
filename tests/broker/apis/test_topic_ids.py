"""Topic ids (KIP-516) on the wire: CreateTopics v7 returns the id, Metadata v10+ carries it and v12 looks topics up
by it, Fetch v13+ and DeleteTopics v6+ name topics by it; a recreated topic has a new id and the old one is answered
UNKNOWN_TOPIC_ID (INCONSISTENT_TOPIC_ID for a fetch parked across the recreation); each partition directory records
its topic id in ``partition.metadata``, and a directory recording another topic's id is never opened as a log of
the topic now bearing its name."""

from __future__ import annotations

import json
import uuid

import trio
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import iter_records
from oncelog.storage.partition_metadata import kafka_uuid_string

from broker.helpers import batch, create_topic_body, fetch_body, produce_body

ZERO = uuid.UUID(int=0)


async def create(client, name: str, partitions: int = 2) -> uuid.UUID:
    response = await client.request(ApiKey.CREATE_TOPICS, 7, create_topic_body(name, partitions))
    [topic] = response.topics
    assert topic.error_code == ErrorCode.NONE
    assert topic.topic_id != ZERO
    return topic.topic_id


async def delete_by_name(client, name: str):
    body = {"topics": [{"name": name, "topic_id": ZERO}], "timeout_ms": 1000}
    [answer] = (await client.request(ApiKey.DELETE_TOPICS, 6, body)).responses
    return answer


async def metadata(client, version: int, topics: list[dict] | None):
    body = {
        "topics": topics,
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }
    return await client.request(ApiKey.METADATA, version, body)


def fetch_by_id(topic_id: uuid.UUID, partitions: list[int], offset: int = 0, *, max_wait_ms: int = 0) -> dict:
    body = fetch_body("", 0, offset, max_wait_ms=max_wait_ms)
    template = body["topics"][0]["partitions"][0]
    body["topics"] = [
        {"topic_id": topic_id, "partitions": [{**template, "partition": p, "fetch_offset": offset} for p in partitions]}
    ]
    return body


def values(records) -> list[bytes]:
    return [r.value for _, r in iter_records(records or b"")]


async def produce(client, name: str, partition: int, payload: list[bytes]) -> None:
    response = await client.request(ApiKey.PRODUCE, 9, produce_body(name, partition, batch(payload)))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE


async def test_metadata_carries_ids_and_v12_looks_topics_up_by_id(start_broker, tmp_path) -> None:
    client = await (await start_broker(tmp_path / "d")).connect()
    old_id = await create(client, "ids", 2)
    for version in (10, 11, 12):
        [entry] = (await metadata(client, version, [{"name": "ids", "topic_id": ZERO}])).topics
        assert (entry.error_code, entry.name, entry.topic_id, len(entry.partitions)) == (0, "ids", old_id, 2)
    [entry] = (await metadata(client, 12, [{"name": None, "topic_id": old_id}])).topics
    assert (entry.error_code, entry.name, entry.topic_id, len(entry.partitions)) == (0, "ids", old_id, 2)
    # All topics (a null list) carry their ids too.
    listed = {t.name: t.topic_id for t in (await metadata(client, 12, None)).topics}
    assert listed["ids"] == old_id

    assert (await delete_by_name(client, "ids")).topic_id == old_id
    new_id = await create(client, "ids", 1)
    assert new_id != old_id
    [stale, fresh] = (await metadata(client, 12, [{"name": None, "topic_id": i} for i in (old_id, new_id)])).topics
    assert (stale.error_code, stale.name, stale.topic_id, stale.partitions) == (
        ErrorCode.UNKNOWN_TOPIC_ID,
        None,
        old_id,
        [],
    )
    assert (fresh.error_code, fresh.name, fresh.topic_id, len(fresh.partitions)) == (0, "ids", new_id, 1)
    # A lookup by id creates nothing, even with auto-creation allowed.
    unheard = uuid.uuid4()
    body = {
        "topics": [{"name": None, "topic_id": unheard}],
        "allow_auto_topic_creation": True,
        "include_topic_authorized_operations": False,
    }
    [entry] = (await client.request(ApiKey.METADATA, 12, body)).topics
    assert (entry.error_code, entry.topic_id) == (ErrorCode.UNKNOWN_TOPIC_ID, unheard)


async def test_metadata_v10_and_v11_refuse_ids(start_broker, tmp_path) -> None:
    client = await (await start_broker(tmp_path / "d")).connect()
    topic_id = await create(client, "early", 1)
    for version in (10, 11):
        for asked in ({"name": "early", "topic_id": topic_id}, {"name": None, "topic_id": ZERO}):
            response = await metadata(client, version, [asked, {"name": "early", "topic_id": ZERO}])
            assert [t.error_code for t in response.topics] == [ErrorCode.INVALID_REQUEST] * 2
            assert response.topics[0].topic_id == asked["topic_id"]


async def test_fetch_v13_reads_by_id_and_answers_old_ids_unknown(start_broker, tmp_path) -> None:
    client = await (await start_broker(tmp_path / "d")).connect()
    old_id = await create(client, "fetched", 2)
    await produce(client, "fetched", 1, [b"a", b"b"])
    response = await client.request(ApiKey.FETCH, 13, fetch_by_id(old_id, [0, 1]))
    [topic] = response.responses
    assert topic.topic_id == old_id
    assert [(p.partition_index, p.error_code, values(p.records)) for p in topic.partitions] == [
        (0, 0, []),
        (1, 0, [b"a", b"b"]),
    ]
    # A partition the topic does not have is unknown, as by name.
    [topic] = (await client.request(ApiKey.FETCH, 13, fetch_by_id(old_id, [5]))).responses
    assert topic.partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    await delete_by_name(client, "fetched")
    new_id = await create(client, "fetched", 1)
    await produce(client, "fetched", 0, [b"new"])
    body = fetch_by_id(old_id, [0, 1])
    body["topics"].append(fetch_by_id(new_id, [0])["topics"][0])
    # Erroneous partitions after the ones read, as Kafka's processResponseCallback orders them.
    fresh, stale = (await client.request(ApiKey.FETCH, 13, body)).responses
    assert stale.topic_id == old_id
    assert [(p.partition_index, p.error_code, values(p.records)) for p in stale.partitions] == [
        (0, ErrorCode.UNKNOWN_TOPIC_ID, []),
        (1, ErrorCode.UNKNOWN_TOPIC_ID, []),
    ]
    assert fresh.topic_id == new_id
    assert [(p.error_code, values(p.records)) for p in fresh.partitions] == [(0, [b"new"])]


async def test_a_fetch_parked_across_a_recreation_is_told_the_id_changed(start_broker, tmp_path) -> None:
    broker = await start_broker(tmp_path / "d")
    client, admin = await broker.connect(), await broker.connect()
    old_id = await create(client, "parked", 1)
    await produce(client, "parked", 0, [b"old-0", b"old-1"])
    answered = []

    async def parked_fetch() -> None:
        answered.append(await client.request(ApiKey.FETCH, 13, fetch_by_id(old_id, [0], 2, max_wait_ms=20_000)))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(parked_fetch)
        await trio.sleep(0.2)  # parked at the old topic's end
        await delete_by_name(admin, "parked")
        await create(admin, "parked", 1)
        await produce(admin, "parked", 0, [b"new-0", b"new-1", b"new-2"])
    [topic] = answered[0].responses
    # Never the new topic's records from offset 2 under the old id.
    assert [(p.error_code, values(p.records)) for p in topic.partitions] == [(ErrorCode.INCONSISTENT_TOPIC_ID, [])]


async def test_delete_topics_v6_by_id(start_broker, tmp_path) -> None:
    client = await (await start_broker(tmp_path / "d")).connect()
    first, second = await create(client, "del-a", 1), await create(client, "del-b", 1)
    body = {
        "topics": [
            {"name": None, "topic_id": first},
            {"name": "del-b", "topic_id": second},
            {"name": None, "topic_id": ZERO},
        ],
        "timeout_ms": 1000,
    }
    answers = (await client.request(ApiKey.DELETE_TOPICS, 6, body)).responses
    assert [(a.name, a.topic_id, a.error_code) for a in answers] == [
        ("del-a", first, ErrorCode.NONE),
        ("del-b", second, ErrorCode.INVALID_REQUEST),
        (None, ZERO, ErrorCode.INVALID_REQUEST),
    ]
    assert [t.error_code for t in (await metadata(client, 12, [{"name": "del-a", "topic_id": ZERO}])).topics] == [
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    ]
    body = {"topics": [{"name": None, "topic_id": first}], "timeout_ms": 1000}
    [again] = (await client.request(ApiKey.DELETE_TOPICS, 6, body)).responses
    assert (again.name, again.topic_id, again.error_code) == (None, first, ErrorCode.UNKNOWN_TOPIC_ID)
    assert (await delete_by_name(client, "del-b")).topic_id == second


async def test_delete_topics_refuses_names_and_ids_listed_twice(start_broker, tmp_path) -> None:
    client = await (await start_broker(tmp_path / "d")).connect()
    topic_id = await create(client, "twice", 1)
    body = {"topic_names": ["twice", "twice"], "timeout_ms": 1000}
    answers = (await client.request(ApiKey.DELETE_TOPICS, 5, body)).responses
    assert [(a.name, a.error_code, a.error_message) for a in answers] == [
        ("twice", ErrorCode.INVALID_REQUEST, "Duplicate topic name.")
    ]
    body = {"topics": [{"name": None, "topic_id": topic_id}] * 2, "timeout_ms": 1000}
    answers = (await client.request(ApiKey.DELETE_TOPICS, 6, body)).responses
    assert [(a.name, a.topic_id, a.error_code) for a in answers] == [(None, topic_id, ErrorCode.INVALID_REQUEST)]
    assert (await delete_by_name(client, "twice")).error_code == ErrorCode.NONE


async def test_partition_directories_record_the_topic_id_as_kafka_writes_it(start_broker, tmp_path) -> None:
    client = await (await start_broker(tmp_path / "d")).connect()
    topic_id = await create(client, "recorded", 2)
    for partition in (0, 1):
        text = (tmp_path / "d" / f"recorded-{partition}" / "partition.metadata").read_text()
        assert text == f"version: 0\ntopic_id: {kafka_uuid_string(topic_id)}"


async def test_a_log_left_by_a_deleted_topic_is_not_taken_for_a_recreated_one(start_broker, tmp_path) -> None:
    data = tmp_path / "d"
    broker = await start_broker(data)
    client = await broker.connect()
    await create(client, "left", 1)
    await create(client, "kept", 1)
    await produce(client, "left", 0, [b"deleted-data"])
    await produce(client, "kept", 0, [b"kept-data"])
    await broker.stop()
    # A deletion cut short by a crash: the topic is gone from the metadata, its log directory is still there.
    topics = json.loads((data / "topics.json").read_text())
    del topics["topics"]["left"]
    (data / "topics.json").write_text(json.dumps(topics))
    (data / "kept-0" / "partition.metadata").unlink()  # a log written before ids were recorded

    broker = await start_broker(data)
    client = await broker.connect()
    assert not (data / "left-0").exists()
    topic_id = await create(client, "left", 1)
    [topic] = (await client.request(ApiKey.FETCH, 13, fetch_by_id(topic_id, [0]))).responses
    assert [(p.error_code, p.high_watermark, values(p.records)) for p in topic.partitions] == [(0, 0, [])]
    # The log without a record keeps its data and now records its topic's id.
    [kept] = (await metadata(client, 12, [{"name": "kept", "topic_id": ZERO}])).topics
    [topic] = (await client.request(ApiKey.FETCH, 13, fetch_by_id(kept.topic_id, [0]))).responses
    assert values(topic.partitions[0].records) == [b"kept-data"]
    text = (data / "kept-0" / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {kafka_uuid_string(kept.topic_id)}"
