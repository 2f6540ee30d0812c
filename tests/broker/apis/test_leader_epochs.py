"""Leader epochs on the wire against an in-process broker: stamped in produced batches and in the partition's
leader-epoch-checkpoint, reported by Metadata and ListOffsets, checked in Fetch, ListOffsets and
OffsetForLeaderEpoch (KIP-101, KIP-320), with Kafka's answers."""

from __future__ import annotations

import time

import trio
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from kafka import KafkaConsumer
from kafka import TopicPartition as KafkaTopicPartition
from oncelog.broker.apis import HANDLERS
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import SimpleRecord, encode_batch
from oncelog.protocol.records.batch import iter_headers
from oncelog.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT

from broker.helpers import create_topic_body, fetch_body, list_offsets_body, produce_body

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3


async def _produce(client, topic: str, values: list[bytes], partition: int = 0, timestamp: int | None = None) -> int:
    records = encode_batch([SimpleRecord(None, v, [], timestamp) for v in values])
    response = await client.request(ApiKey.PRODUCE, 9, produce_body(topic, partition, records))
    result = response.responses[0].partition_responses[0]
    assert result.error_code == ErrorCode.NONE
    return result.base_offset


async def _epochs_in_log(client, topic: str, partition: int = 0) -> list[tuple[int, int]]:
    fetched = await client.request(ApiKey.FETCH, 12, fetch_body(topic, partition, 0))
    records = fetched.responses[0].partitions[0].records
    return [(h.base_offset, h.partition_leader_epoch) for _, h in iter_headers(records, check_crc=True)]


async def _three_epochs(broker, client, topic: str = "epochs") -> None:
    """Offsets 0-1 at epoch 0, 2-3 at epoch 2, 4-5 at epoch 5 (timestamps 1000, 2000, 3000)."""
    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body(topic, partitions=2))
    replicas = broker.node.replicas
    await _produce(client, topic, [b"a", b"b"], timestamp=1000)
    replicas.set_leader_epoch(topic, 0, 2)
    await _produce(client, topic, [b"c", b"d"], timestamp=2000)
    replicas.set_leader_epoch(topic, 0, 5)
    await _produce(client, topic, [b"e", b"f"], timestamp=3000)


async def test_batches_carry_the_leaders_epoch_and_the_checkpoint_records_where_each_began(broker, client) -> None:
    await _three_epochs(broker, client)
    assert await _epochs_in_log(client, "epochs") == [(0, 0), (2, 2), (4, 5)]
    checkpoint = broker.node.replicas.get_log("epochs", 0).directory / LEADER_EPOCH_CHECKPOINT
    assert checkpoint.read_text() == "0\n3\n0 0\n2 2\n5 4\n"


async def test_metadata_reports_each_partitions_leader_epoch(broker, client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("meta", partitions=2))
    broker.node.replicas.set_leader_epoch("meta", 1, 7)
    response = await client.request(
        ApiKey.METADATA, 9, {"topics": [{"name": "meta"}], "allow_auto_topic_creation": False}
    )
    partitions = sorted(response.topics[0].partitions, key=lambda p: p.partition_index)
    assert [(p.partition_index, p.leader_epoch) for p in partitions] == [(0, 0), (1, 7)]


def _list_offsets(topic: str, timestamp: int, current_leader_epoch: int = -1) -> dict:
    body = list_offsets_body(topic, 0, timestamp)
    body["topics"][0]["partitions"][0]["current_leader_epoch"] = current_leader_epoch
    return body


async def test_list_offsets_answers_the_epoch_of_the_offset_found(broker, client) -> None:
    await _three_epochs(broker, client)

    async def lookup(timestamp: int, version: int = 7) -> tuple[int, int, int]:
        response = await client.request(ApiKey.LIST_OFFSETS, version, _list_offsets("epochs", timestamp))
        p = response.topics[0].partitions[0]
        assert p.error_code == ErrorCode.NONE
        return p.offset, p.timestamp, p.leader_epoch

    assert await lookup(LATEST) == (6, -1, 5)  # the partition's current epoch
    assert await lookup(EARLIEST) == (0, -1, 0)
    assert await lookup(1500) == (2, 2000, 2)  # the epoch of the leader that appended the offset
    assert await lookup(2500) == (4, 3000, 5)
    assert await lookup(MAX_TIMESTAMP) == (4, 3000, 5)
    assert await lookup(9999) == (-1, -1, -1)
    response = await client.request(ApiKey.LIST_OFFSETS, 3, _list_offsets("epochs", LATEST))  # no epochs before v4
    assert (response.topics[0].partitions[0].offset, response.topics[0].partitions[0].leader_epoch) == (6, -1)


async def test_list_offsets_checks_the_current_leader_epoch(broker, client) -> None:
    await _three_epochs(broker, client)
    for current, error in ((5, ErrorCode.NONE), (-1, ErrorCode.NONE), (4, ErrorCode.FENCED_LEADER_EPOCH)):
        response = await client.request(ApiKey.LIST_OFFSETS, 7, _list_offsets("epochs", LATEST, current))
        p = response.topics[0].partitions[0]
        assert p.error_code == error
        assert p.offset == (6 if error == ErrorCode.NONE else -1)
    response = await client.request(ApiKey.LIST_OFFSETS, 4, _list_offsets("epochs", LATEST, 6))
    assert response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    response = await client.request(ApiKey.LIST_OFFSETS, 7, _list_offsets("nope", LATEST, 6))
    assert response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_fetch_checks_the_current_leader_epoch(broker, client) -> None:
    await _three_epochs(broker, client)
    for current, error in (
        (5, ErrorCode.NONE),
        (-1, ErrorCode.NONE),
        (4, ErrorCode.FENCED_LEADER_EPOCH),
        (6, ErrorCode.UNKNOWN_LEADER_EPOCH),
    ):
        body = fetch_body("epochs", 0, 0)
        body["topics"][0]["partitions"][0]["current_leader_epoch"] = current
        fetched = await client.request(ApiKey.FETCH, 12, body)
        p = fetched.responses[0].partitions[0]
        assert p.error_code == error, current
        if error == ErrorCode.NONE:
            assert p.high_watermark == 6 and len(list(iter_headers(p.records))) == 3
        else:  # Kafka's answer for an error: no records, offsets unknown
            assert (p.high_watermark, p.last_stable_offset, p.log_start_offset) == (-1, -1, -1)
            assert not p.records
    fetched = await client.request(ApiKey.FETCH, 8, fetch_body("epochs", 0, 0))  # no current epoch before v9
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.NONE


def _offset_for_epoch(partitions: list[tuple[int, int, int]], topic: str = "epochs", replica_id: int = -1) -> dict:
    """(partition, current_leader_epoch, leader_epoch) each."""
    return {
        "replica_id": replica_id,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {"partition": p, "current_leader_epoch": current, "leader_epoch": epoch}
                    for p, current, epoch in partitions
                ],
            }
        ],
    }


async def test_offset_for_leader_epoch_answers_where_each_epoch_ended(broker, client) -> None:
    await _three_epochs(broker, client)
    asked = [(0, -1, epoch) for epoch in (0, 1, 2, 3, 5, 6, -1)]
    for version in (2, 3, 4):
        response = await client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, _offset_for_epoch(asked))
        answers = [(p.error_code, p.leader_epoch, p.end_offset) for p in response.topics[0].partitions]
        assert answers == [
            (ErrorCode.NONE, 0, 2),  # epoch 0 ended where epoch 2 began
            (ErrorCode.NONE, 0, 2),  # epoch 1 never led: the largest epoch below it, and its end
            (ErrorCode.NONE, 2, 4),
            (ErrorCode.NONE, 2, 4),
            (ErrorCode.NONE, 5, 6),  # the latest epoch ends at the log end
            (ErrorCode.NONE, -1, -1),  # newer than any epoch of this log (Kafka's UNDEFINED answer)
            (ErrorCode.NONE, -1, -1),
        ], version


async def test_offset_for_an_epoch_older_than_the_log_gets_the_logs_first_epoch_start(broker, client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("late", partitions=1))
    broker.node.replicas.set_leader_epoch("late", 0, 3)
    await _produce(client, "late", [b"a", b"b", b"c"])
    response = await client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, _offset_for_epoch([(0, 3, 1)], "late"))
    p = response.topics[0].partitions[0]
    # Kafka's LeaderEpochFileCache.endOffsetFor: the epoch asked for, ending where the oldest known one starts.
    assert (p.error_code, p.leader_epoch, p.end_offset) == (ErrorCode.NONE, 1, 0)


async def test_offset_for_leader_epoch_checks_the_current_epoch_and_the_partition(broker, client) -> None:
    await _three_epochs(broker, client)
    asked = [(0, 5, 2), (0, 4, 2), (0, 6, 2), (1, -1, 0), (2, -1, 0)]
    for replica_id in (-1, -2, 1):  # consumer, debug, a follower: the same answers
        response = await client.request(
            ApiKey.OFFSET_FOR_LEADER_EPOCH, 3, _offset_for_epoch(asked, replica_id=replica_id)
        )
        answers = [(p.partition, p.error_code, p.leader_epoch, p.end_offset) for p in response.topics[0].partitions]
        assert answers == [
            (0, ErrorCode.NONE, 2, 4),
            (0, ErrorCode.FENCED_LEADER_EPOCH, -1, -1),
            (0, ErrorCode.UNKNOWN_LEADER_EPOCH, -1, -1),
            (1, ErrorCode.NONE, 0, 0),  # nothing appended there yet: epoch 0 began at creation, at offset 0
            (2, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1, -1),
        ]
    response = await client.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, 4, _offset_for_epoch([(0, -1, 0)], "nope"))
    assert response.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_offset_for_leader_epoch_is_advertised_as_kafka_4_does(client) -> None:
    response = await client.request(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    assert ranges[ApiKey.OFFSET_FOR_LEADER_EPOCH] == (2, 4)


class _Counting:
    """Wraps a handler, counting the requests it answers."""

    def __init__(self, handler) -> None:
        self.handler = handler
        self.calls = 0

    async def __call__(self, broker, request):
        self.calls += 1
        return await self.handler(broker, request)


def _consume(consumer, count: int, timeout_s: float = 30.0) -> tuple[list[tuple[int, int, bytes]], list[int]]:
    """(offset, leader epoch, value) of the next ``count`` records, and the codes of the errors seen meanwhile."""
    records: list[tuple[int, int, bytes]] = []
    errors: list[int] = []
    deadline = time.monotonic() + timeout_s
    while len(records) < count:
        assert time.monotonic() < deadline, f"consumed {records}, errors {errors}"
        message = consumer.poll(0.2)
        if message is None:
            continue
        if message.error() is not None:
            errors.append(message.error().code())
            continue
        records.append((message.offset(), message.leader_epoch(), message.value()))
    return records, errors


def _consumer(broker) -> Consumer:
    consumer = Consumer(
        {
            "bootstrap.servers": f"127.0.0.1:{broker.port}",
            "group.id": "epochs-unused",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 500,
        }
    )
    consumer.assign([TopicPartition("validated", 0, OFFSET_BEGINNING)])
    return consumer


async def test_librdkafka_follows_a_new_leader_epoch_validating_its_position(broker, client, monkeypatch) -> None:
    counted = _Counting(HANDLERS[ApiKey.OFFSET_FOR_LEADER_EPOCH])
    monkeypatch.setitem(HANDLERS, ApiKey.OFFSET_FOR_LEADER_EPOCH, counted)
    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("validated"))
    for i in range(5):
        await _produce(client, "validated", [b"e0-%d" % i, b"e0-%d'" % i])
    consumer = _consumer(broker)
    try:
        first, errors = await trio.to_thread.run_sync(_consume, consumer, 10)
        assert [(offset, epoch) for offset, epoch, _ in first] == [(o, 0) for o in range(10)]  # the batches' epoch

        broker.node.replicas.set_leader_epoch("validated", 0, 3)  # a new leader (this node again)
        await _produce(client, "validated", [b"e3-a", b"e3-b"])
        later, errors = await trio.to_thread.run_sync(_consume, consumer, 2)
        assert [(offset, epoch) for offset, epoch, _ in later] == [(10, 3), (11, 3)]
        assert errors == []
        assert counted.calls >= 1  # librdkafka checked its position against the new leader (KIP-320)
    finally:
        await trio.to_thread.run_sync(consumer.close)


async def test_librdkafka_detects_a_truncated_log_through_offset_for_leader_epoch(broker, client) -> None:
    """A new leader whose log diverges from offset 6 (the old one's records 6-9 were never replicated): the consumer
    at offset 10 learns from OffsetForLeaderEpoch that epoch 0 ended at 6 and goes on from 6 with the new leader's
    records (librdkafka's log-truncation handling with auto.offset.reset set: seek to the end offset answered).
    Without the answer it would resume at 10 and miss 6-9."""
    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("validated"))
    for i in range(5):
        await _produce(client, "validated", [b"old-%d" % (2 * i), b"old-%d" % (2 * i + 1)])
    consumer = _consumer(broker)
    try:
        first, _ = await trio.to_thread.run_sync(_consume, consumer, 10)
        assert [offset for offset, _, _ in first] == list(range(10))

        broker.node.replicas.get_log("validated", 0).truncate_to(6)
        broker.node.replicas.set_leader_epoch("validated", 0, 1)
        await _produce(client, "validated", [b"new-%d" % i for i in range(6, 12)])
        after, _ = await trio.to_thread.run_sync(_consume, consumer, 6)
        assert after == [(o, 1, b"new-%d" % o) for o in range(6, 12)]
    finally:
        await trio.to_thread.run_sync(consumer.close)


def _kafka_python_consume(consumer, count: int, timeout_s: float = 30.0) -> list[tuple[int, int, bytes]]:
    records: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + timeout_s
    while len(records) < count:
        assert time.monotonic() < deadline, f"consumed {records}"
        for batch_records in consumer.poll(timeout_ms=200).values():
            records.extend((r.offset, r.leader_epoch, r.value) for r in batch_records)
    return records


async def test_kafka_python_follows_new_epochs_and_a_truncated_log(broker, client) -> None:
    """kafka-python 3 validates its position too (KIP-320): it goes on after an epoch bump, and back to where the
    old epoch ended when the new leader's log diverged."""
    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("validated"))
    for i in range(5):
        await _produce(client, "validated", [b"old-%d" % (2 * i), b"old-%d" % (2 * i + 1)])
    consumer = await trio.to_thread.run_sync(
        lambda: KafkaConsumer(
            bootstrap_servers=f"127.0.0.1:{broker.port}", auto_offset_reset="earliest", metadata_max_age_ms=500
        )
    )
    try:
        consumer.assign([KafkaTopicPartition("validated", 0)])
        first = await trio.to_thread.run_sync(_kafka_python_consume, consumer, 10)
        assert [(offset, epoch) for offset, epoch, _ in first] == [(o, 0) for o in range(10)]

        broker.node.replicas.set_leader_epoch("validated", 0, 2)
        await _produce(client, "validated", [b"old-10"])
        assert await trio.to_thread.run_sync(_kafka_python_consume, consumer, 1) == [(10, 2, b"old-10")]

        broker.node.replicas.get_log("validated", 0).truncate_to(6)
        broker.node.replicas.set_leader_epoch("validated", 0, 4)
        await _produce(client, "validated", [b"new-%d" % i for i in range(6, 12)])
        after = await trio.to_thread.run_sync(_kafka_python_consume, consumer, 6)
        assert after == [(o, 4, b"new-%d" % o) for o in range(6, 12)]
    finally:
        await trio.to_thread.run_sync(consumer.close)


async def test_a_new_partition_records_its_first_epoch_when_created_not_at_its_first_append(broker, client) -> None:
    """The checkpoint write (an fsync) happens in the creation's worker threads, not on the event loop when the
    partition takes its first records."""
    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("fresh", partitions=3))
    checkpoints = [broker.node.replicas.get_log("fresh", p).directory / LEADER_EPOCH_CHECKPOINT for p in range(3)]
    assert [c.read_text() for c in checkpoints] == ["0\n1\n0 0\n"] * 3
    inodes = [c.stat().st_ino for c in checkpoints]
    for p in range(3):
        await _produce(client, "fresh", [b"x"], partition=p)
    assert [c.stat().st_ino for c in checkpoints] == inodes  # not rewritten (atomic writes replace the file)
    assert await _epochs_in_log(client, "fresh", 2) == [(0, 0)]
