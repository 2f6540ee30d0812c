"""Admin's DeleteRecords, OffsetDelete and DescribeLogDirs against the real broker."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from oncelog.client import Admin, BrokerResponseError, Consumer, Producer, TopicPartition, sync
from oncelog.client.admin import HIGH_WATERMARK
from oncelog.protocol import ErrorCode

from .conftest import fresh_name

T = TopicPartition
EARLIEST, LATEST = -2, -1


async def _produce(bootstrap: str, topic: str, partition: int, values: list[str]) -> None:
    async with Producer(bootstrap) as p:
        for v in values:
            await p.send(topic, v, partition=partition)
        await p.flush()


async def _read_all(bootstrap: str, tp: TopicPartition) -> list[tuple[int, bytes | None]]:
    """(offset, value) of every record of ``tp`` from its log start, until it is idle for 300 ms."""
    async with Consumer(bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        await c.seek_to_beginning()
        out: list[tuple[int, bytes | None]] = []
        while got := await c.getmany(timeout_ms=300):
            out += [(r.offset, r.value) for rs in got.values() for r in rs]
        return out


@pytest.mark.anyio
async def test_delete_records_moves_log_start(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic("delrec", 2)
    tp0, tp1 = T(topic, 0), T(topic, 1)
    await _produce(bootstrap_servers, topic, 0, [f"a{i}" for i in range(10)])
    await _produce(bootstrap_servers, topic, 1, ["b0", "b1", "b2"])
    async with Admin(bootstrap_servers) as admin:
        assert await admin.delete_records({tp0: 6, tp1: HIGH_WATERMARK}) == {tp0: 6, tp1: 3}
        assert await admin.delete_records({tp0: 2}) == {tp0: 6}  # a lower offset leaves the log start as it was
    assert await _read_all(bootstrap_servers, tp0) == [(i, f"a{i}".encode()) for i in range(6, 10)]
    assert await _read_all(bootstrap_servers, tp1) == []
    async with Consumer(bootstrap_servers) as c:
        assert await c.list_offsets([tp0, tp1], EARLIEST) == {tp0: 6, tp1: 3}
        assert await c.list_offsets([tp0, tp1], LATEST) == {tp0: 10, tp1: 3}


@pytest.mark.anyio
async def test_delete_records_errors(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic("delrec-err", 2)
    await _produce(bootstrap_servers, topic, 0, ["x", "y"])
    async with Admin(bootstrap_servers) as admin:
        with pytest.raises(BrokerResponseError, match=f"{topic}-0 OFFSET_OUT_OF_RANGE") as info:
            await admin.delete_records({T(topic, 0): 3, T(topic, 1): 0})
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE
        async with Consumer(bootstrap_servers) as c:
            assert await c.list_offsets([T(topic, 0)], EARLIEST) == {T(topic, 0): 0}  # nothing deleted
        with pytest.raises(BrokerResponseError) as info:
            await admin.delete_records({T(topic, 0): 1, T(topic, 7): 0})
        assert info.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


@pytest.mark.anyio
async def test_delete_group_offsets(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic, other = new_topic("offdel", 2), new_topic("offdel-other", 1)
    group = fresh_name("offdel-g")
    tps = [T(topic, 0), T(topic, 1), T(other, 0)]
    async with Consumer(bootstrap_servers, group_id=group) as c:
        c.assign(tps)
        await c.commit({tp: 1 for tp in tps})
        async with Admin(bootstrap_servers) as admin:
            await admin.delete_group_offsets(group, [T(topic, 0), T(topic, 1)])
        assert await c.committed_many(tps) == {T(topic, 0): None, T(topic, 1): None, T(other, 0): (1, "", -1)}


@pytest.mark.anyio
async def test_delete_group_offsets_of_subscribed_topic(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic, other = new_topic("offdel-sub", 1), new_topic("offdel-unsub", 1)
    group = fresh_name("offdel-active")
    async with Consumer(bootstrap_servers, group_id=group, heartbeat_interval_ms=50) as c:
        c.subscribe([topic])
        with anyio.fail_after(10):
            while not c.assignment():
                await c.getmany(timeout_ms=100)
        await c.commit({T(topic, 0): 0, T(other, 0): 0})
        async with Admin(bootstrap_servers) as admin:
            with pytest.raises(BrokerResponseError, match=f"{group} {topic}-0 GROUP_SUBSCRIBED_TO_TOPIC") as info:
                await admin.delete_group_offsets(group, [T(topic, 0), T(other, 0)])
            assert info.value.code == ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC
            # Only the subscribed topic's offset is kept.
            assert await c.committed_many([T(topic, 0), T(other, 0)]) == {T(topic, 0): (0, "", -1), T(other, 0): None}
            with pytest.raises(BrokerResponseError) as info:
                await admin.delete_group_offsets(fresh_name("no-such-group"), [T(topic, 0)])
            assert info.value.code == ErrorCode.GROUP_ID_NOT_FOUND


def test_describe_log_dirs_sizes_grow(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic("logdirs", 2)
    with sync.Admin(bootstrap_servers) as admin:
        (before,) = admin.describe_log_dirs([topic])
        assert before.partition_sizes == {T(topic, 0): 0, T(topic, 1): 0}
        with sync.Producer(bootstrap_servers) as p:
            p.send_and_wait(topic, b"x" * 1000, partition=1)
        (after,) = admin.describe_log_dirs([topic])
        assert after.broker_id == before.broker_id and after.path == before.path
        assert after.partition_sizes[T(topic, 0)] == 0 and after.partition_sizes[T(topic, 1)] > 1000
        assert after.total_bytes >= after.usable_bytes > 0
        (every,) = admin.describe_log_dirs()
        assert every.path == after.path and T(topic, 1) in every.partition_sizes
        with pytest.raises(BrokerResponseError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            admin.describe_log_dirs([fresh_name("missing")])
