"""The consumer's background fetch: the next records are fetched while the caller works, never out of order."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from oncelog.client import Consumer, Producer, TopicPartition
from oncelog.protocol import ApiKey

pytestmark = pytest.mark.anyio


async def produce(bootstrap: str, topic: str, values: range, *, batches: int = 1) -> None:
    """``values`` as records of partition 0, in ``batches`` batches."""
    step = max(1, len(values) // batches)
    async with Producer(bootstrap) as p:
        for start in range(0, len(values), step):
            for v in values[start : start + step]:
                await p.send(topic, b"%d" % v, partition=0)
            await p.flush()


def count_fetches(consumer: Consumer) -> list[int]:
    """A one-element list counting the Fetch requests ``consumer`` sends from now on."""
    count = [0]
    cluster = consumer._cluster
    request = cluster.request

    async def counting(node: int, key: ApiKey, body: Any, **kw: Any) -> Any:
        if key == ApiKey.FETCH:
            count[0] += 1
        return await request(node, key, body, **kw)

    cluster.request = counting  # type: ignore[method-assign]
    return count


async def test_records_fetched_in_the_background_are_returned_without_a_fetch(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic("prefetch", 1)
    tp = TopicPartition(topic, 0)
    await produce(bootstrap_servers, topic, range(40), batches=4)
    # One batch per fetch: the partition's bytes cap is below a batch, and a fetch returns at least one whole batch.
    async with Consumer(bootstrap_servers, auto_offset_reset="earliest", max_partition_fetch_bytes=64) as c:
        c.assign([tp])
        fetches = count_fetches(c)
        first = await c.getmany(timeout_ms=5000)
        assert [r.offset for r in first[tp]] == list(range(10))
        done = c._prefetch_done
        assert done is not None  # the buffer ran dry: the next batch is on its way
        await done.wait()
        sent = fetches[0]
        second = await c.getmany(timeout_ms=5000)
        assert fetches[0] == sent  # returned what the background fetch brought, without a fetch of its own
        assert [r.offset for r in second[tp]] == list(range(10, 20))
        seen = [r.offset for r in first[tp] + second[tp]]
        for _ in range(10):
            seen += [r.offset for r in (await c.getmany(timeout_ms=1000)).get(tp, [])]
            if len(seen) >= 40:
                break
        assert seen == list(range(40))


async def test_a_seek_during_a_background_fetch_drops_what_it_brought(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic("prefetch-seek", 1)
    tp = TopicPartition(topic, 0)
    await produce(bootstrap_servers, topic, range(30), batches=3)
    async with Consumer(bootstrap_servers, auto_offset_reset="earliest", max_partition_fetch_bytes=64) as c:
        c.assign([tp])
        first = await c.getmany(timeout_ms=5000)
        assert [r.offset for r in first[tp]] == list(range(10))
        done = c._prefetch_done
        assert done is not None  # fetching the batch at 10
        c.seek(tp, 5)
        await done.wait()
        brought = [
            (header.base_offset, header.last_offset) for _, _, batches, _ in c._completed for *_, header, _ in batches
        ]
        assert brought == [(10, 19)]
        seen: list[int] = []
        for _ in range(10):  # bounded: a wrong position would leave nothing more to read
            seen += [r.offset for r in (await c.getmany(timeout_ms=1000)).get(tp, [])]
            if len(seen) >= 25:
                break
        assert seen == list(range(5, 30))
        assert await c.position(tp) == 30


async def test_getmany_batches_hands_out_the_fetched_batches_undecoded(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    """getmany_batches returns the batches getmany would decode, in order, each once, and moves the position past
    them (fetching in the background meanwhile); after getmany left decoded records it refuses."""
    from oncelog.client.errors import IllegalStateError
    from oncelog.client.fetch_parse import decode_selected

    topic = new_topic("batches", 1)
    tp = TopicPartition(topic, 0)
    await produce(bootstrap_servers, topic, range(40), batches=4)
    async with Consumer(bootstrap_servers, auto_offset_reset="earliest", max_partition_fetch_bytes=64) as c:
        c.assign([tp])
        c.seek(tp, 5)  # mid-batch: the first batch carries the position, records before it are the caller's to drop
        seen: list[int] = []
        for _ in range(20):
            for batch in await c.getmany_batches(tp, timeout_ms=2000):
                seen += [r.offset for r in decode_selected(tp, batch)]
            assert await c.position(tp) == (seen[-1] + 1 if seen else 5)
            if len(seen) >= 35:
                break
        assert seen == list(range(5, 40))
        assert await c.getmany_batches(tp, timeout_ms=0) == []

        c.seek(tp, 0)
        first = await c.getmany(tp, timeout_ms=5000, max_records=3)
        assert [r.offset for r in first[tp]] == [0, 1, 2]
        with pytest.raises(IllegalStateError):
            await c.getmany_batches(tp)
