"""The row shape of Spark's Kafka source, as a Spark DDL schema and as Arrow, and the conversions between
consumer records / Arrow record batches and what the producer sends.

Guarantees: :func:`records_to_batch` keeps record order and maps every field one to one (timestamps in ms become
Arrow microsecond timestamps in UTC); :func:`batch_to_sends` accepts ``value`` as binary or string and the
optional columns ``key``, ``topic``, ``partition``, ``headers``, like Spark's Kafka sink.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from oncelog.client import ConsumerRecord

SCHEMA_DDL = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key:string,value:binary>>"
)

HEADER_TYPE = pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))
ARROW_SCHEMA = pa.schema(
    [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", pa.timestamp("us", tz="UTC")),
        pa.field("timestampType", pa.int32()),
        pa.field("headers", HEADER_TYPE),
    ]
)


def records_to_batch(records: Sequence[ConsumerRecord]) -> pa.RecordBatch:
    """Consumer records -> one Arrow record batch of :data:`ARROW_SCHEMA`."""
    return pa.RecordBatch.from_arrays(
        [
            pa.array([r.key for r in records], pa.binary()),
            pa.array([r.value for r in records], pa.binary()),
            pa.array([r.topic for r in records], pa.string()),
            pa.array([r.partition for r in records], pa.int32()),
            pa.array([r.offset for r in records], pa.int64()),
            pa.array([r.timestamp * 1000 for r in records], pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            pa.array([r.timestamp_type for r in records], pa.int32()),
            pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records], HEADER_TYPE),
        ],
        schema=ARROW_SCHEMA,
    )


def _column(batch: pa.RecordBatch, name: str) -> list[Any] | None:
    idx = batch.schema.get_field_index(name)
    return None if idx < 0 else batch.column(idx).to_pylist()


def _as_bytes(value: Any) -> bytes | None:
    return value.encode() if isinstance(value, str) else value


def batch_to_sends(
    batch: pa.RecordBatch, default_topic: str | None
) -> Iterator[tuple[str, bytes | None, bytes | None, int | None, list[tuple[str, bytes | None]]]]:
    """(topic, key, value, partition, headers) for every row of ``batch``; the ``topic`` option wins over the
    column; raises ValueError on a row without a topic."""
    n = batch.num_rows
    values = _column(batch, "value")
    if values is None:
        raise ValueError("the data to write needs a value column")
    keys = _column(batch, "key") or [None] * n
    topics = _column(batch, "topic") or [None] * n
    partitions = _column(batch, "partition") or [None] * n
    headers = _column(batch, "headers") or [None] * n
    for i in range(n):
        topic = default_topic or topics[i]  # the topic option overrides the column, as in Spark
        if topic is None:
            raise ValueError("no topic: set the option topic or give the rows a topic column")
        hs = [(h["key"], _as_bytes(h["value"])) for h in headers[i]] if headers[i] else []
        yield topic, _as_bytes(keys[i]), _as_bytes(values[i]), partitions[i], hs
