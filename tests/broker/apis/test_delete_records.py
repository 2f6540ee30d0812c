"""DeleteRecords through the wire: Kafka's per-partition errors, -1 as the high watermark, the low watermark, reads
and ListOffsets after it, segments deleted, transactions and idempotent producers across it, a full disk, the
timeout, and the new start offset kept across a restart."""

from __future__ import annotations

import pytest
import trio
from oncelog.broker.metadata import CONSUMER_OFFSETS_TOPIC
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import iter_records

from broker.apis.test_idempotence import _init_pid
from broker.helpers import batch, create_topic_body, fetch_body, list_offsets_body, produce_body
from broker.txn.test_transactions import READ_COMMITTED, _add, _end, _init_ok, _produce_txn, _values

EARLIEST, LATEST = -2, -1
HIGH_WATERMARK = -1


async def _delete(client, *partitions: tuple[str, int, int], version: int = 2, timeout_ms: int = 30000) -> dict:
    """DeleteRecords of (topic, partition, offset)s; {(topic, partition): (error, low watermark)}."""
    topics: dict[str, list[dict]] = {}
    for topic, partition, offset in partitions:
        topics.setdefault(topic, []).append({"partition_index": partition, "offset": offset})
    body = {"topics": [{"name": t, "partitions": ps} for t, ps in topics.items()], "timeout_ms": timeout_ms}
    response = await client.request(ApiKey.DELETE_RECORDS, version, body)
    return {(t.name, p.partition_index): (p.error_code, p.low_watermark) for t in response.topics for p in t.partitions}


async def _create(client, name: str, partitions: int = 1, **configs: str) -> None:
    body = create_topic_body(name, partitions, configs={k.replace("_", "."): v for k, v in configs.items()})
    response = await client.request(ApiKey.CREATE_TOPICS, 4, body)
    assert response.topics[0].error_code == ErrorCode.NONE


async def _produce(client, topic: str, values: list[bytes], partition: int = 0) -> int:
    response = await client.request(ApiKey.PRODUCE, 7, produce_body(topic, partition, batch(values)))
    answer = response.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NONE
    return answer.base_offset


async def _list_offset(client, topic: str, timestamp: int, isolation: int = 0) -> int:
    response = await client.request(ApiKey.LIST_OFFSETS, 5, list_offsets_body(topic, 0, timestamp, isolation))
    return response.topics[0].partitions[0].offset


async def _fetch(client, topic: str, offset: int, isolation: int = 0):
    response = await client.request(ApiKey.FETCH, 11, fetch_body(topic, 0, offset, isolation_level=isolation))
    return response.responses[0].partitions[0]


def _offsets(records: bytes) -> list[int]:
    return [record.offset for _header, record in iter_records(records)]


@pytest.mark.parametrize("version", [0, 1, 2])
async def test_deleting_below_an_offset_moves_the_start_there(client, version: int) -> None:
    await _create(client, "trim")
    for i in range(3):
        await _produce(client, "trim", [b"%d-%d" % (i, j) for j in range(4)])  # batches 0-3, 4-7, 8-11
    assert await _delete(client, ("trim", 0, 6), version=version) == {("trim", 0): (ErrorCode.NONE, 6)}
    assert await _list_offset(client, "trim", EARLIEST) == 6
    assert await _list_offset(client, "trim", LATEST) == 12
    assert await _list_offset(client, "trim", 0) == 6  # by timestamp: the first batch at or above the start
    below = await _fetch(client, "trim", 5)
    assert below.error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    at = await _fetch(client, "trim", 6)
    assert (at.error_code, at.log_start_offset, at.high_watermark) == (ErrorCode.NONE, 6, 12)
    assert _offsets(at.records) == list(range(4, 12))  # the batch holding offset 6, whole, as Kafka sends it

    # A lower offset leaves the start where it is, and says where that is.
    assert await _delete(client, ("trim", 0, 2), version=version) == {("trim", 0): (ErrorCode.NONE, 6)}


async def test_minus_one_means_the_high_watermark(broker, client) -> None:
    await _create(client, "all", segment_bytes="200")
    for i in range(6):
        await _produce(client, "all", [b"value-%d" % i * 8])
    partition_log = broker.node.logs.get("all", 0)
    assert len(partition_log.segments) == 6
    assert await _delete(client, ("all", 0, HIGH_WATERMARK)) == {("all", 0): (ErrorCode.NONE, 6)}
    assert await _list_offset(client, "all", EARLIEST) == await _list_offset(client, "all", LATEST) == 6
    # The segments wholly below the start are gone when the answer comes; the active one stays, as in Kafka.
    assert [s.base_offset for s in partition_log.segments] == [5]
    assert sorted(p.name for p in partition_log.directory.glob("*.log")) == [f"{5:020d}.log"]
    empty = await _fetch(client, "all", 6)
    assert (empty.error_code, empty.records or b"") == (ErrorCode.NONE, b"")
    assert await _produce(client, "all", [b"after"]) == 6
    assert [r.value for _, r in iter_records((await _fetch(client, "all", 6)).records)] == [b"after"]


async def test_errors_as_kafka_answers_them(broker, client) -> None:
    await _create(client, "plain", partitions=2)
    await _create(client, "keyed", cleanup_policy="compact")
    await broker.node.ensure_offsets_topic()
    await _produce(client, "plain", [b"a", b"b", b"c"])
    answer = await _delete(
        client,
        ("missing", 0, 1),
        ("plain", 7, 1),  # no such partition
        ("plain", 0, 4),  # above the high watermark (3)
        ("plain", 1, -2),
        ("keyed", 0, 0),
        (CONSUMER_OFFSETS_TOPIC, 0, 0),
        ("plain", 0, 2),  # the same partition again: its last offset counts, answered once
    )
    assert answer == {
        ("missing", 0): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("plain", 7): (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, -1),
        ("plain", 0): (ErrorCode.NONE, 2),
        ("plain", 1): (ErrorCode.OFFSET_OUT_OF_RANGE, -1),
        ("keyed", 0): (ErrorCode.POLICY_VIOLATION, -1),
        (CONSUMER_OFFSETS_TOPIC, 0): (ErrorCode.INVALID_TOPIC_EXCEPTION, -1),
    }
    assert await _delete(client, ("plain", 0, 4)) == {("plain", 0): (ErrorCode.OFFSET_OUT_OF_RANGE, -1)}
    assert await _list_offset(client, "plain", EARLIEST) == 2


async def test_the_start_survives_a_restart(start_broker, tmp_path) -> None:
    data = tmp_path / "kept"
    broker = await start_broker(data)
    client = await broker.connect()
    await _create(client, "kept", segment_bytes="200")
    for i in range(4):
        await _produce(client, "kept", [b"record-%d" % i * 8])
    assert await _delete(client, ("kept", 0, 2)) == {("kept", 0): (ErrorCode.NONE, 2)}
    await broker.stop()

    broker = await start_broker(data)
    client = await broker.connect()
    assert await _list_offset(client, "kept", EARLIEST) == 2
    assert (await _fetch(client, "kept", 1)).error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    assert [r.value for _, r in iter_records((await _fetch(client, "kept", 2)).records)] == [
        b"record-2" * 8,
        b"record-3" * 8,
    ]


async def test_a_full_disk_answers_kafka_storage_error_and_changes_nothing(client, monkeypatch) -> None:
    await _create(client, "full")
    await _produce(client, "full", [b"a", b"b"])

    def disk_full(path, data) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("oncelog.storage.checkpoint.atomic_write", disk_full)
    assert await _delete(client, ("full", 0, 1)) == {("full", 0): (ErrorCode.KAFKA_STORAGE_ERROR, -1)}
    assert await _list_offset(client, "full", EARLIEST) == 0
    assert (await _fetch(client, "full", 0)).error_code == ErrorCode.NONE
    monkeypatch.undo()
    assert await _delete(client, ("full", 0, 1)) == {("full", 0): (ErrorCode.NONE, 1)}


async def test_the_answer_waits_for_a_compaction_pass_no_longer_than_the_timeout(broker, client) -> None:
    await _create(client, "busy", segment_bytes="200", cleanup_policy="compact,delete")
    for i in range(3):
        await _produce(client, "busy", [b"value-%d" % i * 8])
    partition_log = broker.node.logs.get("busy", 0)
    async with broker.node._housekeeping:  # as a compaction pass holds it
        with trio.fail_after(5):
            answer = await _delete(client, ("busy", 0, HIGH_WATERMARK), timeout_ms=200)
        assert answer == {("busy", 0): (ErrorCode.NONE, 3)}
        assert len(partition_log.segments) == 3  # left for the retention sweep
    broker.node._sweep_retention()
    assert [s.base_offset for s in partition_log.segments] == [2]
    assert await _list_offset(client, "busy", EARLIEST) == 3


async def test_an_idempotent_producer_goes_on_after_its_records_are_deleted(client) -> None:
    await _create(client, "idem")
    pid, epoch = await _init_pid(client)

    async def send(values: list[bytes], seq: int):
        records = batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        response = await client.request(ApiKey.PRODUCE, 7, produce_body("idem", 0, records))
        return response.responses[0].partition_responses[0]

    assert (await send([b"a", b"b"], 0)).base_offset == 0
    assert await _delete(client, ("idem", 0, HIGH_WATERMARK)) == {("idem", 0): (ErrorCode.NONE, 2)}
    retried = await send([b"a", b"b"], 0)  # a retry of a deleted batch is still known as a duplicate
    assert (retried.error_code, retried.base_offset, retried.log_start_offset) == (ErrorCode.NONE, 0, 2)
    assert (await send([b"c"], 3)).error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # sequences still checked
    following = await send([b"c"], 2)
    assert (following.error_code, following.base_offset) == (ErrorCode.NONE, 2)


async def test_an_open_transaction_across_the_new_start(client) -> None:
    await _create(client, "txn")
    pid, epoch = await _init_ok(client)
    assert await _add(client, pid, epoch, [("txn", 0)]) == {("txn", 0): ErrorCode.NONE}
    assert (await _produce_txn(client, "txn", 0, [b"t0", b"t1"], pid, epoch, 0)).error_code == ErrorCode.NONE
    await _produce(client, "txn", [b"p2", b"p3"])
    assert await _list_offset(client, "txn", LATEST, READ_COMMITTED) == 0  # held by the open transaction
    assert await _delete(client, ("txn", 0, 3)) == {("txn", 0): (ErrorCode.NONE, 3)}
    assert await _list_offset(client, "txn", LATEST, READ_COMMITTED) == 3  # the LSO is at least the start
    assert await _end(client, pid, epoch, commit=False) == ErrorCode.NONE
    # The aborted transaction began below the start; read_committed readers are still told to drop it.
    read = await _fetch(client, "txn", 3, READ_COMMITTED)
    assert (read.error_code, read.last_stable_offset, read.log_start_offset) == (ErrorCode.NONE, 5, 3)
    assert [(a.producer_id, a.first_offset) for a in read.aborted_transactions] == [(pid, 0)]
    assert _values(read.records) == [b"p2", b"p3"]  # the client skips p2 itself: it is below its fetch offset
