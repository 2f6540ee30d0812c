"""Produce, fetch, list offsets and topic admin through the wire, against an in-process broker."""

from __future__ import annotations

import trio
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import iter_records

from broker.helpers import batch, create_topic_body, fetch_body, list_offsets_body, produce_body


async def _produce(client, topic: str, values: list[bytes], partition: int = 0, **kwargs):
    response = await client.request(ApiKey.PRODUCE, 7, produce_body(topic, partition, batch(values, **kwargs)))
    return response.responses[0].partition_responses[0]


async def test_produce_then_fetch_returns_the_records(client) -> None:
    created = await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("t", partitions=2))
    assert created.topics[0].error_code == ErrorCode.NONE
    first = await _produce(client, "t", [b"a", b"b", b"c"])
    second = await _produce(client, "t", [b"d"])
    assert (first.error_code, first.base_offset, second.base_offset) == (ErrorCode.NONE, 0, 3)
    for version in (4, 11, 12):
        fetched = await client.request(ApiKey.FETCH, version, fetch_body("t", 0, 0))
        partition = fetched.responses[0].partitions[0]
        assert partition.error_code == ErrorCode.NONE
        assert partition.high_watermark == 4
        assert [(r.offset, r.value) for _, r in iter_records(partition.records)] == [
            (0, b"a"),
            (1, b"b"),
            (2, b"c"),
            (3, b"d"),
        ]


async def test_fetch_from_the_middle_of_a_batch_and_out_of_range(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("mid"))
    await _produce(client, "mid", [b"a", b"b", b"c"])
    fetched = await client.request(ApiKey.FETCH, 11, fetch_body("mid", 0, 2))
    offsets = [r.offset for _, r in iter_records(fetched.responses[0].partitions[0].records)]
    assert 2 in offsets  # whole batches come back; the client skips records below its position
    fetched = await client.request(ApiKey.FETCH, 11, fetch_body("mid", 0, 10))
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    fetched = await client.request(ApiKey.FETCH, 11, fetch_body("mid", 0, 3))
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.NONE
    assert fetched.responses[0].partitions[0].records in (b"", None)


async def test_long_poll_returns_when_data_arrives(broker, client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("poll"))
    producer = await broker.connect()
    result = {}

    async def consume() -> None:
        started = trio.current_time()
        result["response"] = await client.request(ApiKey.FETCH, 11, fetch_body("poll", 0, 0, max_wait_ms=10000))
        result["waited"] = trio.current_time() - started

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        await trio.sleep(0.3)
        await _produce(producer, "poll", [b"late"])
    records = list(iter_records(result["response"].responses[0].partitions[0].records))
    assert [r.value for _, r in records] == [b"late"]
    assert 0.25 < result["waited"] < 5


async def test_long_poll_times_out_empty(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("idle"))
    started = trio.current_time()
    fetched = await client.request(ApiKey.FETCH, 11, fetch_body("idle", 0, 0, max_wait_ms=300))
    assert trio.current_time() - started >= 0.29
    assert fetched.responses[0].partitions[0].records in (b"", None)


async def test_fetch_max_bytes_returns_at_least_one_batch(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("limits"))
    for _ in range(5):
        await _produce(client, "limits", [b"x" * 1000])
    fetched = await client.request(ApiKey.FETCH, 11, fetch_body("limits", 0, 0, partition_max_bytes=10))
    assert len(list(iter_records(fetched.responses[0].partitions[0].records))) == 1
    fetched = await client.request(ApiKey.FETCH, 11, fetch_body("limits", 0, 0, partition_max_bytes=2500))
    assert len(list(iter_records(fetched.responses[0].partitions[0].records))) == 2


async def test_acks_zero_sends_no_response(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("fire"))
    await client.send(ApiKey.PRODUCE, 7, produce_body("fire", 0, batch([b"a"]), acks=0))
    # The next response on the connection belongs to the next request; the record becomes visible once fsynced.
    response = await client.request(ApiKey.FETCH, 11, fetch_body("fire", 0, 0, max_wait_ms=5000))
    assert [r.value for _, r in iter_records(response.responses[0].partitions[0].records)] == [b"a"]


async def test_list_offsets_earliest_latest_and_by_timestamp(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("times"))
    await _produce(client, "times", [b"a"], now_ms=1_000)
    await _produce(client, "times", [b"b"], now_ms=2_000)
    await _produce(client, "times", [b"c"], now_ms=3_000)

    async def lookup(ts: int, version: int = 7) -> tuple[int, int]:
        response = await client.request(ApiKey.LIST_OFFSETS, version, list_offsets_body("times", 0, ts))
        partition = response.topics[0].partitions[0]
        assert partition.error_code == ErrorCode.NONE
        return partition.offset, partition.timestamp

    assert (await lookup(-2))[0] == 0
    assert (await lookup(-1, version=1))[0] == 3
    assert await lookup(1_500) == (1, 2_000)
    assert await lookup(3_000) == (2, 3_000)
    assert (await lookup(9_000))[0] == -1
    assert await lookup(-3) == (2, 3_000)


async def test_metadata_auto_creates_and_respects_the_flag(client) -> None:
    body = {"topics": [{"name": "auto"}], "allow_auto_topic_creation": True}
    response = await client.request(ApiKey.METADATA, 9, body)
    topic = response.topics[0]
    assert (topic.error_code, len(topic.partitions)) == (ErrorCode.NONE, 1)
    assert response.controller_id == response.brokers[0].node_id
    body = {"topics": [{"name": "manual"}], "allow_auto_topic_creation": False}
    response = await client.request(ApiKey.METADATA, 9, body)
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    response = await client.request(
        ApiKey.METADATA, 4, {"topics": [{"name": "bad name!"}], "allow_auto_topic_creation": True}
    )
    assert response.topics[0].error_code == ErrorCode.INVALID_TOPIC_EXCEPTION
    response = await client.request(ApiKey.METADATA, 1, {"topics": None})
    assert [t.name for t in response.topics] == ["auto"]


async def test_create_topics_validation(client) -> None:
    async def create(name: str, partitions: int = 1, replication: int = 1, configs: dict | None = None) -> int:
        response = await client.request(
            ApiKey.CREATE_TOPICS, 5, create_topic_body(name, partitions, replication, configs)
        )
        return response.topics[0].error_code

    assert await create("ok", 3, configs={"retention.ms": "1000"}) == ErrorCode.NONE
    assert await create("ok") == ErrorCode.TOPIC_ALREADY_EXISTS
    assert await create("o.k") == ErrorCode.NONE
    assert await create("o_k") == ErrorCode.INVALID_TOPIC_EXCEPTION  # collides with o.k
    assert await create("a" * 250) == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert await create("bad/name") == ErrorCode.INVALID_TOPIC_EXCEPTION
    assert await create("zero", 0) == ErrorCode.INVALID_PARTITIONS
    assert await create("rf", 1, 3) == ErrorCode.INVALID_REPLICATION_FACTOR
    assert await create("__consumer_offsets") == ErrorCode.INVALID_REQUEST
    assert await create("cfg", configs={"no.such.config": "1"}) == ErrorCode.INVALID_CONFIG
    for policy in ("", "bogus", "compact,bogus", " , "):
        assert await create("cfg", configs={"cleanup.policy": policy}) == ErrorCode.INVALID_CONFIG, policy
    assert await create("cfg", configs={"cleanup.policy": "compact, delete"}) == ErrorCode.NONE
    body = create_topic_body("dup")
    body["topics"] = body["topics"] * 2
    response = await client.request(ApiKey.CREATE_TOPICS, 5, body)
    assert [t.error_code for t in response.topics] == [ErrorCode.INVALID_REQUEST] * 2


async def test_describe_configs_shows_topic_overrides(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("conf", configs={"retention.ms": "1234"}))
    body = {
        "resources": [{"resource_type": 2, "resource_name": "conf", "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    response = await client.request(ApiKey.DESCRIBE_CONFIGS, 4, body)
    configs = {c.name: c for c in response.results[0].configs}
    assert configs["retention.ms"].value == "1234"
    assert configs["retention.ms"].config_source == 1
    assert configs["segment.bytes"].value == "1073741824"
    body["resources"][0]["resource_name"] = "missing"
    response = await client.request(ApiKey.DESCRIBE_CONFIGS, 1, body)
    assert response.results[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    body["resources"] = [{"resource_type": 4, "resource_name": "1", "configuration_keys": ["num.partitions"]}]
    response = await client.request(ApiKey.DESCRIBE_CONFIGS, 2, body)
    assert [(c.name, c.value) for c in response.results[0].configs] == [("num.partitions", "1")]


async def test_delete_topic(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("gone"))
    await _produce(client, "gone", [b"a"])
    response = await client.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": ["gone", "never"], "timeout_ms": 1000})
    assert [r.error_code for r in response.responses] == [ErrorCode.NONE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
    response = await client.request(
        ApiKey.METADATA, 4, {"topics": [{"name": "gone"}], "allow_auto_topic_creation": False}
    )
    assert response.topics[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_topic_overrides_apply_to_its_logs_after_a_restart(start_broker, tmp_path) -> None:
    data = tmp_path / "restart-data"
    broker = await start_broker(data)
    client = await broker.connect()
    configs = {"retention.ms": "1234", "segment.bytes": "4096"}
    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("keep", partitions=2, configs=configs))
    await _produce(client, "keep", [b"x"])
    before = [broker.node.logs.get("keep", p).config for p in range(2)]
    await broker.stop()

    broker = await start_broker(data)
    after = [broker.node.logs.get("keep", p).config for p in range(2)]
    assert after == before
    assert (after[0].retention_ms, after[0].segment_bytes) == (1234, 4096)


async def test_cleanup_policy_reaches_the_logs_and_internal_topics_are_compacted(broker, client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("kept", configs={"cleanup.policy": "compact"}))
    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("aged"))
    assert broker.node.logs.get("kept", 0).config.cleanup_policy == ("compact",)
    assert broker.node.logs.get("aged", 0).config.cleanup_policy == ("delete",)
    await broker.node.ensure_offsets_topic()
    await broker.node.transactions.state_log.ensure_topic()
    for topic in ("__consumer_offsets", "__transaction_state"):
        config = broker.node.logs.get(topic, 0).config
        assert (config.cleanup_policy, config.deletes, config.segment_bytes) == (("compact",), False, 104857600)


async def test_internal_topics_created_before_the_policy_existed_are_compacted(start_broker, tmp_path) -> None:
    data = tmp_path / "old-data"
    broker = await start_broker(data)
    await broker.node.topics.ensure_internal("__consumer_offsets", 2, {"segment.bytes": "104857600"})  # as before
    assert broker.node.metadata.get("__consumer_offsets").configs == {"segment.bytes": "104857600"}
    await broker.stop()

    broker = await start_broker(data)
    assert broker.node.logs.get("__consumer_offsets", 1).config.cleanup_policy == ("compact",)
