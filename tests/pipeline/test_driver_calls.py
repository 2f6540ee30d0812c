"""The driver's share of format("oncelog") outside Spark: what each driver-side call costs (Spark runs each in a
Python process it starts for it) and the write protocol's two ends, task and commit, against a broker."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import anyio
import pyarrow as pa
import pytest
from oncelog.client import TopicPartition
from oncelog.client.sync import Admin
from oncelog.pipeline import offsets
from oncelog.pipeline.options import SinkOptions, SourceOptions
from oncelog.pipeline.spark import OncelogStreamReader
from oncelog.pipeline.txn_end import commit_batch
from oncelog.pipeline.txn_task import committed_batch, write_task
from pyspark.sql.streaming.datasource import ReadAllAvailable

from .helpers import new_topic, read_all

WRITER_PROBE = """
import json, sys
from oncelog.pipeline.options import SinkOptions
from oncelog.pipeline.spark import OncelogDataSource
source = OncelogDataSource({"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "t", "checkpointLocation": "/tmp/c"})
source.streamWriter(None, False)
source.writer(None, False)
print(json.dumps(sorted(m for m in ("oncelog.client", "anyio", "pyarrow", "numpy") if m in sys.modules)))
"""


def test_building_a_writer_does_no_io_and_imports_no_client() -> None:
    """Spark builds the writer in a fresh process to plan a write and again to commit each batch: an unreachable
    bootstrap must not matter there, and the process starts without the client, anyio, pyarrow or numpy."""
    out = subprocess.run([sys.executable, "-c", WRITER_PROBE], capture_output=True, text=True, timeout=60, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_stream_reader_takes_two_snapshots_for_an_available_now_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spark's calls for one Trigger.AvailableNow batch, in its order: the start's snapshot answers prepare, initial
    and first latest; the latestOffset after the batch looks again (and finds a partition created meanwhile)."""
    tp0, tp1 = TopicPartition("in", 0), TopicPartition("in", 1)
    taken: list[offsets.Snapshot] = [
        offsets.Snapshot({tp0: 5}, {tp0: 100}),
        offsets.Snapshot({tp0: 5, tp1: 0}, {tp0: 150, tp1: 7}),
    ]
    calls = iter(taken)
    monkeypatch.setattr(offsets, "snapshot", lambda opts: next(calls))
    opts = SourceOptions.parse({"kafka.bootstrap.servers": "127.0.0.1:9", "subscribe": "in"}, streaming=True)
    reader = OncelogStreamReader(opts)
    reader.prepareForTriggerAvailableNow()
    start = reader.initialOffset()
    assert start == {"in": {"0": 100}}  # startingOffsets latest (the streaming default)
    end = reader.latestOffset(start, ReadAllAvailable())
    assert end == {"in": {"0": 100}}
    assert reader.initialOffset() == start  # asked again: the same position, no snapshot
    after = reader.latestOffset(end, ReadAllAvailable())
    assert after == {"in": {"0": 100, "1": 0}}  # the target stays the start's; the new partition starts earliest
    assert next(calls, None) is None  # two snapshots in all


def test_first_task_creates_the_marker_topic_and_the_commit_fences_the_rest(bootstrap: str) -> None:
    """A task that finds no marker creates a missing marker topic; ``commit_batch`` commits the batch's
    transactions and aborts any other open one of the query, over one connection."""
    out = new_topic(bootstrap, "drv-out", 1)
    markers = f"drv-markers-{uuid.uuid4().hex[:8]}"
    sink = SinkOptions.parse(
        {
            "kafka.bootstrap.servers": bootstrap,
            "topic": out,
            "oncelog.query.id": markers,
            "oncelog.markers.topic": markers,
        },
        streaming=True,
    )

    def rows(tag: str) -> list[pa.RecordBatch]:
        keys = [f"{tag}{i}".encode() for i in range(50)]
        return [pa.RecordBatch.from_pydict({"key": keys, "value": keys})]

    kept = write_task(sink, 0, 0, rows("kept"))
    dangling = write_task(sink, 1, 0, rows("dangling"))  # a task whose driver died: its message never arrives
    assert kept.producer_id >= 0 and dangling.producer_id >= 0
    with Admin(bootstrap) as admin:
        assert admin.list_topics().get(markers) == 1
    commit_batch(sink, [kept])
    assert sorted(r.value for r in read_all(bootstrap, out, idle_ms=500)) == sorted(
        rows("kept")[0].column(0).to_pylist()
    )
    assert anyio.run(committed_batch, sink, 0) == 0
    assert anyio.run(committed_batch, sink, 1) is None  # the dangling transaction was aborted with its marker
