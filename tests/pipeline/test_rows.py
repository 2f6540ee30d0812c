"""The bulk conversions between consumer records, Arrow batches and producer sends, and the bulk send (no Spark)."""

from __future__ import annotations

import datetime as dt
import uuid

import anyio
import pyarrow as pa
import pytest
from oncelog.client import Admin, Consumer, Producer, TopicPartition, TxnState
from oncelog.client.types import ConsumerRecord
from oncelog.pipeline.rows import ARROW_SCHEMA, batch_to_sends, records_to_batch
from oncelog.pipeline.txn_task import send_rows


def test_records_to_batch_maps_every_field_in_order() -> None:
    records = [
        ConsumerRecord("t", 3, 7, 1_700_000_000_123, 1, None, b"v0", (("h", b"1"), ("g", None))),
        ConsumerRecord("u", 4, 8, 1_700_000_000_124, 0, b"k1", None, ()),
    ]
    batch = records_to_batch(records)
    assert batch.schema == ARROW_SCHEMA
    rows = batch.to_pylist()
    assert rows[0] == {
        "key": None,
        "value": b"v0",
        "topic": "t",
        "partition": 3,
        "offset": 7,
        "timestamp": dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC),
        "timestampType": 1,
        "headers": [{"key": "h", "value": b"1"}, {"key": "g", "value": None}],
    }
    assert rows[1]["key"] == b"k1" and rows[1]["value"] is None and rows[1]["headers"] == []
    assert (rows[1]["topic"], rows[1]["partition"], rows[1]["offset"], rows[1]["timestampType"]) == ("u", 4, 8, 0)
    assert batch.column("timestamp").cast(pa.int64()).to_pylist() == [1_700_000_000_123_000, 1_700_000_000_124_000]
    assert records_to_batch([]).num_rows == 0


def test_batch_to_sends_columns_and_topic_option() -> None:
    batch = pa.RecordBatch.from_pydict(
        {
            "key": pa.array(["a", None], pa.string()),
            "value": pa.array(["x", "y"], pa.string()),
            "topic": pa.array(["t1", "t2"], pa.string()),
            "partition": pa.array([1, None], pa.int32()),
            "headers": pa.array([[{"key": "h", "value": b"1"}], None], ARROW_SCHEMA.field("headers").type),
        }
    )
    assert list(batch_to_sends(batch, None)) == [
        ("t1", b"a", b"x", 1, [("h", b"1")]),
        ("t2", None, b"y", None, None),
    ]
    assert [row[0] for row in batch_to_sends(batch, "opt")] == ["opt", "opt"]  # the option wins over the column
    only_values = pa.RecordBatch.from_pydict({"value": pa.array([b"v"], pa.binary())})
    assert list(batch_to_sends(only_values, "t")) == [("t", None, b"v", None, None)]


def test_batch_to_sends_refuses_rows_without_topic_or_value() -> None:
    no_topic = pa.RecordBatch.from_pydict({"value": [b"v"], "topic": pa.array([None], pa.string())})
    with pytest.raises(ValueError, match="no topic"):
        list(batch_to_sends(no_topic, None))
    with pytest.raises(ValueError, match="no topic"):
        list(batch_to_sends(pa.RecordBatch.from_pydict({"value": [b"v"]}), None))
    with pytest.raises(ValueError, match="value column"):
        list(batch_to_sends(pa.RecordBatch.from_pydict({"key": [b"k"]}), "t"))


def test_send_rows_queues_in_bulk_and_a_failed_send_fails_the_transaction(bootstrap: str) -> None:
    """send_rows reads no per-row result: a row the broker refuses must still leave the transaction unusable."""
    topic = f"rows-{uuid.uuid4().hex[:8]}"

    async def run() -> tuple[TxnState | None, TxnState | None, list[bytes | None]]:
        async with Admin(bootstrap) as admin:
            await admin.create_topic(topic, 2, configs={"max.message.bytes": "100000"})
        rows = [(topic, f"k{i}".encode(), f"v{i}".encode(), None, None) for i in range(5000)]
        async with Producer(bootstrap, transactional_id=f"t-{topic}", linger_ms=5) as producer:
            await producer.init_transactions()
            await producer.begin_transaction()
            await send_rows(producer, iter(rows))
            await producer.flush()
            good = producer.transaction_state
            await producer.commit_transaction()
            await producer.begin_transaction()
            await send_rows(producer, iter([(topic, None, b"x" * 200_000, 0, None)]))  # over max.message.bytes
            await producer.flush()
            bad = producer.transaction_state
            await producer.abort_transaction()
        async with Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest") as consumer:
            tps = [TopicPartition(topic, p) for p in (0, 1)]
            consumer.assign(tps)
            got: list[bytes | None] = []
            while len(got) < len(rows):
                batches = await consumer.getmany(*tps, timeout_ms=1000)
                got += [r.value for records in batches.values() for r in records]
        return good, bad, got

    good, bad, got = anyio.run(run)
    assert good is TxnState.IN_TRANSACTION
    assert bad is not TxnState.IN_TRANSACTION
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(5000))


def test_send_batch_bulk_path_partitions_like_send_and_keeps_order(
    bootstrap: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch with a topic option and non-null keys goes out in bulk (never row by row): every record lands where
    Kafka's default partitioner puts its key, in input order within each partition; a batch with a null key goes
    row by row."""
    from oncelog.client.partitioner import partition_for_key
    from oncelog.pipeline import txn_task

    topic = f"bulk-{uuid.uuid4().hex[:8]}"
    row_calls: list[int] = []
    row_path = txn_task.send_rows

    async def counting_send_rows(producer, rows) -> None:
        row_calls.append(1)
        await row_path(producer, rows)

    monkeypatch.setattr(txn_task, "send_rows", counting_send_rows)
    keyed = pa.RecordBatch.from_pydict(
        {"key": pa.array([f"k{i}" for i in range(3000)], pa.string()), "value": [f"v{i}".encode() for i in range(3000)]}
    )
    nullable = pa.RecordBatch.from_pydict({"key": [b"a", None], "value": [b"n0", b"n1"]})

    async def run() -> list[ConsumerRecord]:
        async with Admin(bootstrap) as admin:
            await admin.create_topic(topic, 3)
        async with Producer(bootstrap, transactional_id=f"t-{topic}", linger_ms=5, batch_size=16384) as producer:
            await producer.init_transactions()
            await producer.begin_transaction()
            await txn_task.send_batch(producer, keyed, topic)
            assert row_calls == []  # the bulk path
            await txn_task.send_batch(producer, nullable, topic)
            assert row_calls == [1]  # a null key: row by row
            await producer.commit_transaction()
        async with Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest") as consumer:
            tps = [TopicPartition(topic, p) for p in range(3)]
            consumer.assign(tps)
            got: list[ConsumerRecord] = []
            while len(got) < 3002:
                batches = await consumer.getmany(*tps, timeout_ms=1000)
                got += [r for records in batches.values() for r in records]
        return got

    got = anyio.run(run)
    keyed_got = [r for r in got if r.value.startswith(b"v")]
    assert sorted(r.value for r in keyed_got) == sorted(f"v{i}".encode() for i in range(3000))
    assert all(r.partition == partition_for_key(r.key, 3) for r in keyed_got)
    for p in range(3):
        mine = sorted((r for r in keyed_got if r.partition == p), key=lambda r: r.offset)
        numbers = [int(r.value[1:]) for r in mine]
        assert numbers == sorted(numbers)  # input order within the partition
    assert sorted(r.value for r in got if r.value.startswith(b"n")) == [b"n0", b"n1"]
