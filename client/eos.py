"""Exactly-once consume-transform-produce: read committed input, write output and input offsets in one transaction.

Guarantees: each transaction holds the outputs of a run of input records and (with a group) the input offsets
after them, so a crash and restart neither loses nor duplicates output for a read_committed reader. Without a
group nothing records progress: a rerun starts from the beginning again.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any

import anyio
from oncelog.client.consumer import Consumer
from oncelog.client.errors import KafkaError
from oncelog.client.producer import Producer
from oncelog.client.types import ConsumerRecord, TopicPartition

Transform = Callable[[ConsumerRecord], Any]


def outputs_of(result: Any, record: ConsumerRecord) -> list[tuple[Any, Any]]:
    """A transform's result -> [(key, value)]: None drops, a tuple is (key, value), a list is several, anything
    else is a value under the input record's key."""
    if result is None:
        return []
    if isinstance(result, list):
        return [pair for item in result for pair in outputs_of(item, record)]
    if isinstance(result, tuple):
        return [(result[0], result[1])]
    return [(record.key, result)]


async def next_batch(
    consumer: Consumer, max_records: int, idle_timeout_ms: float | None
) -> dict[TopicPartition, list[ConsumerRecord]]:
    """The next records (at most ``max_records``), waiting for some up to ``idle_timeout_ms`` (None: forever);
    empty when none came."""
    got: dict[TopicPartition, list[ConsumerRecord]] = {}
    with anyio.move_on_after(idle_timeout_ms / 1000 if idle_timeout_ms is not None else math.inf):
        while not got:
            got = await consumer.getmany(timeout_ms=200, max_records=max_records)
    return got


def offsets_after(got: Mapping[TopicPartition, Sequence[ConsumerRecord]]) -> dict[TopicPartition, int]:
    """The offsets to commit once ``got`` is processed: each partition's last offset + 1."""
    return {tp: records[-1].offset + 1 for tp, records in got.items() if records}


@contextlib.asynccontextmanager
async def transaction(producer: Producer) -> AsyncIterator[None]:
    """Begin a transaction; commit it when the block ends, abort it (shielded from cancellation) when the block
    or the commit raises, and re-raise."""
    await producer.begin_transaction()
    try:
        yield
        await producer.commit_transaction()
    except BaseException:
        with anyio.CancelScope(shield=True), contextlib.suppress(KafkaError):
            await producer.abort_transaction()
        raise


async def copy_topic(
    bootstrap_servers: str,
    source: str,
    destination: str,
    *,
    transactional_id: str,
    group_id: str | None = None,
    transform: Transform | None = None,
    batch: int = 500,
    idle_timeout_ms: int = 2000,
    committed: Callable[[int, int], None] | None = None,
    **security: Any,
) -> tuple[int, int]:
    """Copy ``source`` to ``destination`` (same partition numbers when the transform keeps keys and the counts
    match; else by key) until the input is idle for ``idle_timeout_ms``; returns (records read, records written).
    ``committed`` is called after each committed transaction with those totals so far."""
    read = written = 0
    async with (
        Consumer(
            bootstrap_servers,
            group_id=group_id,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            skip_expired=False,  # a copy keeps every record, expired or not
            **security,
        ) as consumer,
        Producer(bootstrap_servers, transactional_id=transactional_id, **security) as producer,
    ):
        consumer.assign(await consumer.partitions_for_topic(source))
        await producer.init_transactions()
        while got := await next_batch(consumer, batch, idle_timeout_ms):
            async with transaction(producer):
                for records in got.values():
                    for record in records:
                        read += 1
                        result = transform(record) if transform is not None else record.value
                        for key, value in outputs_of(result, record):
                            await producer.send(destination, value, key, headers=record.headers)
                            written += 1
                if group_id is not None:
                    await producer.send_offsets_to_transaction(offsets_after(got), consumer.group_metadata())
            if committed is not None:
                committed(read, written)
        return read, written
