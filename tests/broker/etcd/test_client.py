"""The etcd client against a real etcd (Debian's etcd-server) on loopback ports: every call the cluster uses."""

from __future__ import annotations

import asyncio

import pytest
import trio
from oncelog.broker.etcd.client import (
    Compare,
    Delete,
    EtcdClient,
    EtcdUnavailable,
    Get,
    Put,
    WatchBatch,
    WatchCompacted,
    prefix_end,
)
from support.etcd import EtcdProcess
from support.ports import free_port


@pytest.fixture
def prefix(request: pytest.FixtureRequest) -> str:
    """A key prefix of this test's own, so tests sharing the module's etcd do not see each other's keys."""
    return f"/test/{request.node.name}/"


def test_prefix_end_covers_exactly_the_prefix() -> None:
    assert prefix_end("/a/") == b"/a0"
    assert prefix_end("a\xff") == "a\xff".encode()[:-1] + b"\xc0"  # U+00FF is two UTF-8 bytes: last one grows
    assert prefix_end("") == b"\0"


async def test_put_get_prefix_delete(etcd: EtcdProcess, prefix: str) -> None:
    async with EtcdClient([etcd.url]) as client:
        first = await client.put(prefix + "b", b"two")
        second = await client.put(prefix + "a", b"\x00one")
        assert second > first
        await client.put(prefix.rstrip("/") + "-sibling", b"not under the prefix")

        kv = await client.get(prefix + "a")
        assert kv is not None and kv.value == b"\x00one" and kv.version == 1
        assert kv.create_revision == kv.mod_revision == second
        assert await client.get(prefix + "missing") is None

        kvs, revision = await client.get_prefix(prefix)
        assert [(k.key, k.value) for k in kvs] == [(prefix + "a", b"\x00one"), (prefix + "b", b"two")]
        assert revision >= second

        assert await client.delete(prefix, prefix=True) == 2
        assert (await client.get_prefix(prefix))[0] == []
        assert await client.get(prefix.rstrip("/") + "-sibling") is not None


async def test_txn_create_if_absent_happens_once(etcd: EtcdProcess, prefix: str) -> None:
    key = prefix + "controller"
    async with EtcdClient([etcd.url]) as client:
        won = await client.txn([Compare.absent(key)], [Put(key, b"1")], [Get(key)])
        assert won.succeeded and won.ranges == []
        lost = await client.txn([Compare.absent(key)], [Put(key, b"2")], [Get(key)])
        assert not lost.succeeded
        assert [kv.value for kv in lost.ranges[0]] == [b"1"]  # the loser learns who holds it
        assert (await client.get(key)).value == b"1"


async def test_txn_refuses_a_stale_revision(etcd: EtcdProcess, prefix: str) -> None:
    """The AlterPartition rule: a change based on a state someone else has changed since is refused."""
    key = prefix + "partition-0"
    async with EtcdClient([etcd.url]) as client:
        await client.put(key, b"epoch 1")
        seen = await client.get(key)
        await client.put(key, b"epoch 2")  # another broker's change
        stale = await client.txn([Compare.unchanged(seen)], [Put(key, b"epoch 2 from a stale view")])
        assert not stale.succeeded
        fresh = await client.get(key)
        ok = await client.txn([Compare.unchanged(fresh)], [Put(key, b"epoch 3"), Delete(prefix + "other")])
        assert ok.succeeded and ok.revision > fresh.mod_revision
        assert (await client.get(key)).value == b"epoch 3"


async def test_lease_keeps_and_revoking_deletes_its_keys(etcd: EtcdProcess, prefix: str) -> None:
    key = prefix + "brokers/1"
    async with EtcdClient([etcd.url]) as client:
        lease = await client.grant_lease(10)
        assert lease.ttl_s == 10
        await client.put(key, b"broker 1", lease=lease.id)
        assert (await client.get(key)).lease == lease.id
        assert 0 < await client.keep_alive(lease.id) <= 10
        await client.revoke_lease(lease.id)
        assert await client.get(key) is None
        assert await client.keep_alive(lease.id) == 0  # expired or revoked: nothing to renew
        await client.revoke_lease(lease.id)  # twice is not an error


async def test_lease_lapses_without_keepalive(etcd: EtcdProcess, prefix: str) -> None:
    key = prefix + "brokers/2"
    async with EtcdClient([etcd.url]) as client:
        lease = await client.grant_lease(2)
        await client.put(key, b"broker 2", lease=lease.id)
        with trio.fail_after(10):
            while await client.get(key) is not None:
                await trio.sleep(0.2)
        assert await client.keep_alive(lease.id) == 0


async def test_watch_sees_puts_and_deletes_in_revision_order(etcd: EtcdProcess, prefix: str) -> None:
    async with EtcdClient([etcd.url]) as client:
        await client.put(prefix + "before", b"old")
        _, revision = await client.get_prefix(prefix)
        seen: list[tuple[str, bool, bytes]] = []
        revisions: list[int] = []

        async def watch(task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
            task_status.started()
            async for batch in client.watch(prefix, start_revision=revision + 1):
                revisions.append(batch.revision)
                seen.extend((e.kv.key, e.deleted, e.kv.value) for e in batch.events)
                if len(seen) == 3:
                    return

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                await nursery.start(watch)
                await client.put(prefix + "x", b"1")
                await client.put(prefix.rstrip("/") + "-outside", b"ignored")
                await client.put(prefix + "x", b"2")
                await client.delete(prefix + "before")
        assert seen == [(prefix + "x", False, b"1"), (prefix + "x", False, b"2"), (prefix + "before", True, b"")]
        assert revisions == sorted(revisions) and revisions[0] > revision


async def test_watch_from_a_compacted_revision_says_so(etcd: EtcdProcess, prefix: str) -> None:
    async with EtcdClient([etcd.url]) as client:
        first = await client.put(prefix + "k", b"1")
        last = await client.put(prefix + "k", b"2")
        await client._call("/v3/kv/compaction", {"revision": str(last), "physical": True})
        with trio.fail_after(10), pytest.raises(WatchCompacted) as raised:
            async for _ in client.watch(prefix, start_revision=first):
                pytest.fail("a compacted revision delivered events")
        assert raised.value.compact_revision >= last


async def test_a_dead_endpoint_is_skipped_and_all_dead_is_unavailable(etcd: EtcdProcess, prefix: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    async with EtcdClient([dead, etcd.url]) as client:
        await client.put(prefix + "k", b"v")
        assert (await client.get(prefix + "k")).value == b"v"
    async with EtcdClient([dead], request_timeout_s=1) as client:
        with pytest.raises(EtcdUnavailable, match="no etcd endpoint answered"):
            await client.get(prefix + "k")


async def test_survives_an_etcd_restart(prefix: str) -> None:
    """Pooled connections to a restarted etcd are dropped and the next call reconnects; data written is kept."""
    with EtcdProcess() as server:
        async with EtcdClient([server.url]) as client:
            await client.put(prefix + "k", b"before")
            await trio.to_thread.run_sync(server.restart)
            assert (await client.get(prefix + "k")).value == b"before"
            await client.put(prefix + "k", b"after")
            batches: list[WatchBatch] = []
            with trio.move_on_after(1):
                async for batch in client.watch(prefix, start_revision=1):
                    batches.append(batch)
            assert [e.kv.value for b in batches for e in b.events] == [b"before", b"after"]


def test_runs_on_asyncio_too(etcd: EtcdProcess, prefix: str) -> None:
    async def main() -> bytes:
        async with EtcdClient([etcd.url]) as client:
            await client.put(prefix + "k", b"asyncio")
            kv = await client.get(prefix + "k")
            return kv.value if kv else b""

    assert asyncio.run(main()) == b"asyncio"
