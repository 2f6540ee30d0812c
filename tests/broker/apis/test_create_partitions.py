"""CreatePartitions through the wire: growth, Kafka's errors, validate_only, persistence, and the new partitions
in Produce, Fetch, Metadata and transactions."""

from __future__ import annotations

import json

import pytest
from oncelog.broker.metadata import CONSUMER_OFFSETS_TOPIC
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import iter_records

from broker.helpers import batch, create_topic_body, fetch_body, produce_body
from broker.txn.test_transactions import READ_COMMITTED, _add, _end, _fetch, _init_ok, _produce_txn, _values

NODE = 1  # node.id default
MAX_INT32 = 2**31 - 1


def _body(*topics: tuple[str, int] | tuple[str, int, list[list[int]] | None], validate_only: bool = False) -> dict:
    return {
        "topics": [
            {
                "name": t[0],
                "count": t[1],
                "assignments": None if len(t) < 3 or t[2] is None else [{"broker_ids": ids} for ids in t[2]],
            }
            for t in topics
        ],
        "timeout_ms": 30000,
        "validate_only": validate_only,
    }


async def _grow(client, *topics, version: int = 3, validate_only: bool = False) -> dict[str, tuple[int, str | None]]:
    response = await client.request(ApiKey.CREATE_PARTITIONS, version, _body(*topics, validate_only=validate_only))
    return {r.name: (r.error_code, r.error_message) for r in response.results}


def _metadata_body(topic: str) -> dict:
    return {"topics": [{"name": topic}], "allow_auto_topic_creation": False}


async def _partition_count(client, topic: str) -> int:
    response = await client.request(ApiKey.METADATA, 9, _metadata_body(topic))
    assert response.topics[0].error_code == ErrorCode.NONE
    return len(response.topics[0].partitions)


async def _produce(client, topic: str, partition: int, values: list[bytes]):
    response = await client.request(ApiKey.PRODUCE, 7, produce_body(topic, partition, batch(values)))
    return response.responses[0].partition_responses[0]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_growth_is_visible_in_metadata(client, version: int) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("grow", partitions=2))
    assert await _grow(client, ("grow", 5), version=version) == {"grow": (ErrorCode.NONE, None)}
    assert await _partition_count(client, "grow") == 5
    response = await client.request(ApiKey.METADATA, 9, _metadata_body("grow"))
    assert sorted((p.partition_index, p.leader_id, list(p.replica_nodes)) for p in response.topics[0].partitions) == [
        (i, NODE, [NODE]) for i in range(5)
    ]


async def test_errors_as_kafka_answers_them(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("three", partitions=3))
    results = await _grow(client, ("three", 3), ("missing", 4), version=2)
    assert results == {
        "three": (ErrorCode.INVALID_PARTITIONS, "Topic already has 3 partition(s)."),
        "missing": (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, None),
    }
    message = "The topic three currently has 3 partition(s); 2 would not be an increase."
    assert await _grow(client, ("three", 2)) == {"three": (ErrorCode.INVALID_PARTITIONS, message)}
    code, message = (await _grow(client, ("three", MAX_INT32)))["three"]
    assert code == ErrorCode.INVALID_PARTITIONS and "file descriptors" in message
    assert await _partition_count(client, "three") == 3


async def test_a_topic_named_twice_is_refused_once_and_others_proceed(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("twice"))
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("once"))
    response = await client.request(ApiKey.CREATE_PARTITIONS, 3, _body(("twice", 2), ("twice", 3), ("once", 2)))
    assert sorted((r.name, r.error_code, r.error_message) for r in response.results) == [
        ("once", ErrorCode.NONE, None),
        ("twice", ErrorCode.INVALID_REQUEST, "Duplicate topic name."),
    ]
    assert (await _partition_count(client, "twice"), await _partition_count(client, "once")) == (1, 2)


@pytest.mark.parametrize(
    ("assignments", "message"),
    [
        ([[NODE]], "Attempted to add 2 additional partition(s), but only 1 assignment(s) were specified."),
        ([[NODE]] * 3, "Attempted to add 2 additional partition(s), but only 3 assignment(s) were specified."),
        ([[NODE], []], "The manual partition assignment includes an empty replica list."),
        ([[NODE], [7]], "The manual partition assignment includes broker 7, but no such broker is registered."),
        ([[NODE], [NODE, 2]], "The manual partition assignment includes broker 2, but no such broker is registered."),
        ([[NODE], [NODE, NODE]], f"The manual partition assignment includes the broker {NODE} more than once."),
    ],
)
async def test_bad_assignments_are_refused(client, assignments: list[list[int]], message: str) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("assigned"))
    assert await _grow(client, ("assigned", 3, assignments)) == {
        "assigned": (ErrorCode.INVALID_REPLICA_ASSIGNMENT, message)
    }
    assert await _partition_count(client, "assigned") == 1


async def test_assignments_naming_this_broker_grow_the_topic(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("assigned"))
    assert await _grow(client, ("assigned", 3, [[NODE], [NODE]])) == {"assigned": (ErrorCode.NONE, None)}
    assert await _partition_count(client, "assigned") == 3


async def test_validate_only_changes_nothing(broker, client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("dry", partitions=2))
    topics_json = (broker.node.data_dir / "topics.json").read_bytes()
    assert await _grow(client, ("dry", 4), validate_only=True) == {"dry": (ErrorCode.NONE, None)}
    message = "The topic dry currently has 2 partition(s); 1 would not be an increase."
    assert await _grow(client, ("dry", 1), validate_only=True) == {"dry": (ErrorCode.INVALID_PARTITIONS, message)}
    assert await _partition_count(client, "dry") == 2
    assert (broker.node.data_dir / "topics.json").read_bytes() == topics_json
    assert broker.node.logs.get("dry", 2) is None
    assert (await _produce(client, "dry", 2, [b"x"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_internal_topics_cannot_grow(broker, client) -> None:
    await broker.node.ensure_offsets_topic()
    count = await _partition_count(client, CONSUMER_OFFSETS_TOPIC)
    assert await _grow(client, (CONSUMER_OFFSETS_TOPIC, count + 1)) == {
        CONSUMER_OFFSETS_TOPIC: (
            ErrorCode.INVALID_REQUEST,
            f"Adding partitions to internal topic {CONSUMER_OFFSETS_TOPIC} is prohibited.",
        )
    }
    assert await _partition_count(client, CONSUMER_OFFSETS_TOPIC) == count


async def test_produce_and_fetch_on_a_new_partition(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("routed"))
    assert (await _produce(client, "routed", 1, [b"early"])).error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    fetched = await client.request(ApiKey.FETCH, 12, fetch_body("routed", 1, 0))
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    assert await _grow(client, ("routed", 2)) == {"routed": (ErrorCode.NONE, None)}
    produced = await _produce(client, "routed", 1, [b"a", b"b"])
    assert (produced.error_code, produced.base_offset) == (ErrorCode.NONE, 0)
    assert (await _produce(client, "routed", 0, [b"old"])).error_code == ErrorCode.NONE
    fetched = await client.request(ApiKey.FETCH, 12, fetch_body("routed", 1, 0))
    partition = fetched.responses[0].partitions[0]
    assert (partition.error_code, partition.high_watermark) == (ErrorCode.NONE, 2)
    assert [r.value for _, r in iter_records(partition.records)] == [b"a", b"b"]


async def test_new_partitions_survive_a_restart(start_broker, tmp_path) -> None:
    data = tmp_path / "grow-data"
    broker = await start_broker(data)
    client = await broker.connect()
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("kept", partitions=1))
    assert await _grow(client, ("kept", 3)) == {"kept": (ErrorCode.NONE, None)}
    # Persisted before the answer: the file already says 3.
    assert json.loads((data / "topics.json").read_text())["topics"]["kept"]["partitions"] == 3
    assert (await _produce(client, "kept", 2, [b"survives"])).error_code == ErrorCode.NONE
    await broker.stop()

    broker = await start_broker(data)
    client = await broker.connect()
    assert await _partition_count(client, "kept") == 3
    fetched = await client.request(ApiKey.FETCH, 12, fetch_body("kept", 2, 0))
    assert [r.value for _, r in iter_records(fetched.responses[0].partitions[0].records)] == [b"survives"]
    assert (await _produce(client, "kept", 1, [b"new"])).error_code == ErrorCode.NONE


async def test_new_partitions_exist_after_restart_even_if_their_logs_were_never_made(start_broker, tmp_path) -> None:
    data = tmp_path / "crash-data"
    broker = await start_broker(data)
    client = await broker.connect()
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("half"))
    await broker.stop()
    # As if the broker died after persisting the new count and before creating the logs.
    meta = json.loads((data / "topics.json").read_text())
    meta["topics"]["half"]["partitions"] = 2
    (data / "topics.json").write_text(json.dumps(meta))

    broker = await start_broker(data)
    client = await broker.connect()
    assert await _partition_count(client, "half") == 2
    assert (await _produce(client, "half", 1, [b"x"])).error_code == ErrorCode.NONE


async def test_transaction_over_an_old_and_a_new_partition_commits(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("span"))
    pid, epoch = await _init_ok(client)
    assert await _add(client, pid, epoch, [("span", 1)]) == {("span", 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
    assert await _grow(client, ("span", 2)) == {"span": (ErrorCode.NONE, None)}
    assert await _add(client, pid, epoch, [("span", 0), ("span", 1)]) == {("span", 0): 0, ("span", 1): 0}
    assert (await _produce_txn(client, "span", 0, [b"old"], pid, epoch, 0)).error_code == ErrorCode.NONE
    assert (await _produce_txn(client, "span", 1, [b"new"], pid, epoch, 0)).error_code == ErrorCode.NONE
    assert _values((await _fetch(client, "span", 1, READ_COMMITTED)).records) == []
    assert await _end(client, pid, epoch, commit=True) == ErrorCode.NONE
    assert _values((await _fetch(client, "span", 0, READ_COMMITTED)).records) == [b"old"]
    new = await _fetch(client, "span", 1, READ_COMMITTED)
    assert (_values(new.records), new.last_stable_offset) == ([b"new"], 2)  # the record and the COMMIT marker


async def test_create_topics_over_the_limit_and_on_a_full_disk(broker, client, monkeypatch) -> None:
    too_many = await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("huge", MAX_INT32))
    assert too_many.topics[0].error_code == ErrorCode.INVALID_PARTITIONS
    assert "file descriptors" in too_many.topics[0].error_message

    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("kept", 1))

    def disk_full(path, data) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("oncelog.broker.metadata.atomic_write", disk_full)
    unsaved = await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("unsaved"))
    assert unsaved.topics[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert broker.node.metadata.get("unsaved") is None and broker.node.logs.get("unsaved", 0) is None
    body = {"topics": [{"name": "kept", "count": 2, "assignments": None}], "timeout_ms": 1000,
            "validate_only": False}  # fmt: skip
    grown = await client.request(ApiKey.CREATE_PARTITIONS, 3, body)
    assert grown.results[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert broker.node.metadata.get("kept").partitions == 1 and broker.node.logs.get("kept", 1) is None
    monkeypatch.undo()
    created = await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("unsaved"))
    assert created.topics[0].error_code == ErrorCode.NONE  # nothing of the failed attempt stands in its way
