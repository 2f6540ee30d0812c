"""The bulk conversions between consumer records, Arrow batches and producer sends (no Spark, no broker)."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from oncelog.client.types import ConsumerRecord
from oncelog.pipeline.rows import ARROW_SCHEMA, batch_to_sends, records_to_batch


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
