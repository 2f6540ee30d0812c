"""The producer's bulk append (``RecordAccumulator.append_many``, used by ``Producer.append_many``): batches cut
where record-by-record appends cut them, and one future shared by many records settled once."""

from __future__ import annotations

import random

import pytest
from oncelog.client.accumulator import BATCH_OVERHEAD, RecordAccumulator, record_size
from oncelog.client.future import Future
from oncelog.client.types import TopicPartition
from oncelog.protocol.records import SimpleRecord


@pytest.mark.parametrize("seed", range(5))
def test_append_many_cuts_batches_where_append_would(seed: int) -> None:
    rng = random.Random(seed)
    tp = TopicPartition("t", 0)
    records = [SimpleRecord(b"k", b"x" * rng.choice((0, 10, 100, 900, 5000)), [], 1) for _ in range(400)]
    sizes = [record_size(r) for r in records]
    one, bulk = RecordAccumulator(4096, 5, 1000), RecordAccumulator(4096, 5, 1000)
    shared: Future = Future()
    head = rng.randrange(50)  # part of the records appended one by one first: the bulk append fills that batch on
    for r, size in zip(records[:head], sizes[:head], strict=True):
        bulk.append(tp, r, shared, 0.0, size)
    bulk.append_many(tp, records[head:], sizes[head:], shared, 0.0)
    for r, size in zip(records, sizes, strict=True):
        one.append(tp, r, shared, 0.0, size)
    assert [(b.records, b.size) for b in bulk.queues[tp]] == [(b.records, b.size) for b in one.queues[tp]]
    assert all(len(b.futures) == len(b.records) for b in bulk.queues[tp])


def test_a_shared_future_is_settled_once_by_the_first_batch() -> None:
    tp = TopicPartition("t", 0)
    acc = RecordAccumulator(200, 5, 1000)
    shared: Future = Future()
    records = [SimpleRecord(None, b"x" * 50, [], 1000 + i) for i in range(6)]
    acc.append_many(tp, records, [record_size(r) for r in records], shared, 0.0)
    first, second = list(acc.queues[tp])[:2]
    first.complete(40, -1)
    assert shared.result().offset == 40 and shared.result().timestamp == 1000
    second.fail(RuntimeError("late"))  # the future is settled already: nothing changes
    assert shared.exception() is None
    failing: Future = Future()
    acc.append_many(tp, records, [record_size(r) for r in records], failing, 0.0)
    list(acc.queues[tp])[-1].fail(RuntimeError("refused"))
    assert isinstance(failing.exception(), RuntimeError)


def test_append_many_fills_a_batch_exactly() -> None:
    """Records that fill batch.size exactly share a batch, as with append; the next one starts another."""
    tp = TopicPartition("t", 0)
    records = [SimpleRecord(None, b"x" * 100, [], 1) for _ in range(5)]
    size = record_size(records[0])
    acc = RecordAccumulator(BATCH_OVERHEAD + 2 * size, 5, 1000)
    acc.append(tp, records[0], Future(), 0.0, size)
    acc.append_many(tp, records[1:], [size] * 4, Future(), 0.0)  # the first fills the open batch exactly
    assert [len(b.records) for b in acc.queues[tp]] == [2, 2, 1]
