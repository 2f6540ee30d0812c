"""Consumer groups through the client: assignors, subscribe/rebalance, commits, offsets inside transactions."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from oncelog.client import Admin, Consumer, ConsumerRecord, Producer, TopicPartition
from oncelog.client.assignors import decode_assignment, encode_assignment, range_assign, roundrobin_assign
from oncelog.client.eos import copy_topic
from oncelog.protocol.consumer_protocol import decode_subscription, encode_subscription

from .conftest import fresh_name

T = TopicPartition


def test_range_assignor_matches_kafka() -> None:
    subs = {"c1": ["a", "b"], "c0": ["a", "b"]}
    plan = range_assign(subs, {"a": 3, "b": 2})
    assert plan == {"c0": [T("a", 0), T("a", 1), T("b", 0)], "c1": [T("a", 2), T("b", 1)]}


def test_roundrobin_assignor_matches_kafka() -> None:
    subs = {"c0": ["a", "b"], "c1": ["a", "b"]}
    plan = roundrobin_assign(subs, {"a": 3, "b": 2})
    assert plan == {"c0": [T("a", 0), T("a", 2), T("b", 1)], "c1": [T("a", 1), T("b", 0)]}
    uneven = roundrobin_assign({"c0": ["a"], "c1": ["a", "b"]}, {"a": 2, "b": 2})
    assert uneven == {"c0": [T("a", 0)], "c1": [T("a", 1), T("b", 0), T("b", 1)]}


def test_consumer_protocol_encodings_round_trip() -> None:
    assert decode_subscription(encode_subscription(["x", "y"])) == ["x", "y"]
    tps = [T("x", 2), T("x", 0), T("y", 1)]
    assert decode_assignment(encode_assignment(tps)) == [T("x", 0), T("x", 2), T("y", 1)]
    assert decode_assignment(b"") == []


async def _fill(bootstrap: str, topic: str, partitions: int, per_partition: int) -> None:
    async with Producer(bootstrap) as p:
        for i in range(partitions * per_partition):
            await p.send(topic, f"v{i}", partition=i % partitions)
        await p.flush()


@pytest.mark.anyio
async def test_subscribe_rebalance_commit_committed(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic("grp", 4)
    group = fresh_name("g")
    await _fill(bootstrap_servers, topic, 4, 5)
    kw = {"group_id": group, "auto_offset_reset": "earliest", "heartbeat_interval_ms": 50}
    async with Consumer(bootstrap_servers, **kw) as c1, Consumer(bootstrap_servers, **kw) as c2:
        c1.subscribe([topic])
        got = await c1.getmany(timeout_ms=3000)
        assert c1.assignment() == {T(topic, p) for p in range(4)}
        assert sum(len(v) for v in got.values()) == 20
        await c1.commit()
        assert await c1.committed(T(topic, 0)) == 5
        c2.subscribe([topic])

        async def poll(c: Consumer) -> None:
            with anyio.move_on_after(5):
                while len(c1.assignment()) != 2 or len(c2.assignment()) != 2:
                    await c.getmany(timeout_ms=50)

        async with anyio.create_task_group() as tg:
            tg.start_soon(poll, c1)
            tg.start_soon(poll, c2)
        assert c1.assignment() | c2.assignment() == {T(topic, p) for p in range(4)}
        assert not c1.assignment() & c2.assignment()
        assert c1.group_metadata().generation_id == c2.group_metadata().generation_id >= 2
        # c2's partitions resume from c1's commit: nothing left to read.
        assert await c2.getmany(timeout_ms=300) == {}
        async with Admin(bootstrap_servers) as admin:
            assert group in {g.group_id for g in await admin.list_groups()}
            desc = (await admin.describe_groups([group]))[group]
            assert desc.state == "Stable" and desc.protocol == "range" and len(desc.members) == 2


@pytest.mark.anyio
async def test_send_offsets_to_transaction(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    src, dst = new_topic("eos-in", 2), new_topic("eos-out", 2)
    group = fresh_name("eos")
    await _fill(bootstrap_servers, src, 2, 10)
    tp0 = T(src, 0)
    async with (
        Consumer(
            bootstrap_servers, group_id=group, isolation_level="read_committed", auto_offset_reset="earliest"
        ) as c,
        Producer(bootstrap_servers, transactional_id=f"tid-{group}") as p,
    ):
        c.assign([tp0])
        await p.init_transactions()
        await p.begin_transaction()
        await p.send(dst, b"x", partition=0)
        await p.send_offsets_to_transaction({tp0: 7}, c.group_metadata())
        await p.abort_transaction()
        assert await c.committed(tp0) is None
        await p.begin_transaction()
        await p.send(dst, b"y", partition=0)
        await p.send_offsets_to_transaction({tp0: 4}, c.group_metadata())
        await p.commit_transaction()
        assert await c.committed(tp0) == 4
        assert await c.position(tp0) == 4  # a fresh position starts at the committed offset


@pytest.mark.anyio
async def test_copy_topic_exactly_once(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    src, dst = new_topic("cp-in", 2), new_topic("cp-out", 2)
    group = fresh_name("cp")
    await _fill(bootstrap_servers, src, 2, 15)

    def upper(record: ConsumerRecord) -> bytes | None:
        return record.value.upper() if int(record.value[1:]) % 3 else None

    read, written = await copy_topic(
        bootstrap_servers,
        src,
        dst,
        transactional_id=f"tid-{group}",
        group_id=group,
        transform=upper,
        batch=7,
        idle_timeout_ms=300,
    )
    assert (read, written) == (30, 20)
    again = await copy_topic(
        bootstrap_servers, src, dst, transactional_id=f"tid-{group}", group_id=group, idle_timeout_ms=300
    )
    assert again == (0, 0)  # the committed group offsets say everything was copied
    async with Consumer(bootstrap_servers, isolation_level="read_committed", auto_offset_reset="earliest") as c:
        c.assign([T(dst, 0), T(dst, 1)])
        out: list[bytes] = []
        with anyio.move_on_after(3):
            while len(out) < 20:
                got = await c.getmany(timeout_ms=200)
                out += [r.value for rs in got.values() for r in rs]
    assert sorted(out) == sorted(f"V{i}".encode() for i in range(30) if i % 3)
