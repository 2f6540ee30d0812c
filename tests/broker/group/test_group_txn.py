"""TxnOffsetCommit through the wire: pending until the COMMIT marker, dropped on ABORT, require_stable, fencing,
and pending offsets surviving a restart."""

from __future__ import annotations

import trio
from oncelog.protocol import ApiKey, ErrorCode

from broker.group.test_groups import FAST, GROUP, _topic, fetch_offsets, join, sync
from broker.txn.test_transactions import _end, _init_ok

TXN = "copier"


async def _add_offsets(client, pid: int, epoch: int, group: str = GROUP) -> int:
    body = {"transactional_id": TXN, "producer_id": pid, "producer_epoch": epoch, "group_id": group}
    return (await client.request(ApiKey.ADD_OFFSETS_TO_TXN, 0, body)).error_code


async def _txn_commit(client, pid, epoch, offsets, *, version=3, generation=-1, member_id="", instance=None):
    body = {
        "transactional_id": TXN,
        "group_id": GROUP,
        "producer_id": pid,
        "producer_epoch": epoch,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": instance,
        "topics": [
            {"name": t, "partitions": [{"partition_index": p, "committed_offset": o, "committed_metadata": "m"}]}
            for (t, p), o in offsets.items()
        ],
    }
    response = await client.request(ApiKey.TXN_OFFSET_COMMIT, version, body)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def test_pending_until_commit_marker(start_broker) -> None:
    broker = await start_broker(**FAST)
    client = await broker.connect()
    topic = await _topic(client)
    pid, epoch = await _init_ok(client, TXN)
    # Not added with AddOffsetsToTxn yet: refused.
    assert await _txn_commit(client, pid, epoch, {(topic, 0): 5}) == {(topic, 0): ErrorCode.INVALID_TXN_STATE}
    assert await _add_offsets(client, pid, epoch) == ErrorCode.NONE
    assert await _txn_commit(client, pid, epoch, {(topic, 0): 5}) == {(topic, 0): ErrorCode.NONE}
    assert (await fetch_offsets(client, [(topic, 0)]))[(topic, 0)] == (-1, "", ErrorCode.NONE)
    stable = await fetch_offsets(client, [(topic, 0), (topic, 1)], require_stable=True)
    assert stable[(topic, 0)][2] == ErrorCode.UNSTABLE_OFFSET_COMMIT and stable[(topic, 1)][2] == ErrorCode.NONE
    assert await _end(client, pid, epoch, True, TXN) == ErrorCode.NONE
    assert (await fetch_offsets(client, [(topic, 0)], require_stable=True))[(topic, 0)] == (5, "m", ErrorCode.NONE)


async def test_abort_drops_offsets_and_old_epoch_is_fenced(start_broker) -> None:
    broker = await start_broker(**FAST)
    client = await broker.connect()
    topic = await _topic(client)
    pid, epoch = await _init_ok(client, TXN)
    await _add_offsets(client, pid, epoch)
    await _txn_commit(client, pid, epoch, {(topic, 0): 9})
    assert await _end(client, pid, epoch, False, TXN) == ErrorCode.NONE
    assert (await fetch_offsets(client, [(topic, 0)], require_stable=True))[(topic, 0)] == (-1, "", ErrorCode.NONE)
    # A new producer instance bumps the epoch: the zombie is fenced (PRODUCER_FENCED from v3, before that
    # INVALID_PRODUCER_EPOCH).
    pid2, epoch2 = await _init_ok(client, TXN)
    assert (pid2, epoch2) == (pid, epoch + 1)
    await _add_offsets(client, pid2, epoch2)
    assert await _txn_commit(client, pid, epoch, {(topic, 0): 1}) == {(topic, 0): ErrorCode.PRODUCER_FENCED}
    fenced_v0 = await _txn_commit(client, pid, epoch, {(topic, 0): 1}, version=0)
    assert fenced_v0 == {(topic, 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert await _txn_commit(client, 424242, 0, {(topic, 0): 1}) == {(topic, 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}


async def test_zombie_with_old_generation_is_fenced(start_broker) -> None:
    broker = await start_broker(**FAST)
    client = await broker.connect()
    topic = await _topic(client)
    joined = await join(client)
    await sync(client, joined.generation_id, joined.member_id, {})
    pid, epoch = await _init_ok(client, TXN)
    await _add_offsets(client, pid, epoch)
    member = {"member_id": joined.member_id}
    stale = await _txn_commit(client, pid, epoch, {(topic, 0): 1}, generation=joined.generation_id - 1, **member)
    assert stale == {(topic, 0): ErrorCode.ILLEGAL_GENERATION}
    unknown = await _txn_commit(client, pid, epoch, {(topic, 0): 1}, generation=joined.generation_id, member_id="x")
    assert unknown == {(topic, 0): ErrorCode.UNKNOWN_MEMBER_ID}
    ok = await _txn_commit(client, pid, epoch, {(topic, 0): 1}, generation=joined.generation_id, **member)
    assert ok == {(topic, 0): ErrorCode.NONE}


async def test_plain_commit_after_txn_offsets_wins(start_broker) -> None:
    broker = await start_broker(**FAST)
    client = await broker.connect()
    topic = await _topic(client)
    pid, epoch = await _init_ok(client, TXN)
    await _add_offsets(client, pid, epoch)
    await _txn_commit(client, pid, epoch, {(topic, 0): 5})
    from broker.group.test_groups import commit

    assert await commit(client, {(topic, 0): (8, "plain")}) == {(topic, 0): ErrorCode.NONE}
    await _end(client, pid, epoch, True, TXN)
    # The plain commit's record is later in the log than the transactional one.
    assert (await fetch_offsets(client, [(topic, 0)]))[(topic, 0)] == (8, "plain", ErrorCode.NONE)


async def test_pending_offsets_survive_restart(start_broker, tmp_path) -> None:
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    topic = await _topic(client)
    pid, epoch = await _init_ok(client, TXN)
    await _add_offsets(client, pid, epoch)
    await _txn_commit(client, pid, epoch, {(topic, 0): 5, (topic, 1): 6})
    await broker.stop()
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    stable = await fetch_offsets(client, [(topic, 0)], require_stable=True)
    assert stable[(topic, 0)][2] == ErrorCode.UNSTABLE_OFFSET_COMMIT
    assert await _end(client, pid, epoch, True, TXN) == ErrorCode.NONE
    assert (await fetch_offsets(client, [(topic, 0), (topic, 1)])) == {
        (topic, 0): (5, "m", ErrorCode.NONE),
        (topic, 1): (6, "m", ErrorCode.NONE),
    }
    await broker.stop()
    # And the committed result replays from the marker.
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    assert (await fetch_offsets(client, [(topic, 1)], require_stable=True))[(topic, 1)] == (6, "m", ErrorCode.NONE)


async def test_offset_delete_drops_pending_offsets_also_after_restart(start_broker, tmp_path) -> None:
    from broker.group.test_offset_delete import delete_offsets

    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    topic = await _topic(client)
    pid, epoch = await _init_ok(client, TXN)
    await _add_offsets(client, pid, epoch)
    await _txn_commit(client, pid, epoch, {(topic, 0): 5, (topic, 1): 6})
    # As Kafka's tombstone replay: the pending offset of (topic, 0) goes; the marker then commits only (topic, 1).
    assert await delete_offsets(client, GROUP, [(topic, 0)]) == (ErrorCode.NONE, {(topic, 0): ErrorCode.NONE})
    assert await _end(client, pid, epoch, True, TXN) == ErrorCode.NONE
    expected = {(topic, 0): (-1, "", ErrorCode.NONE), (topic, 1): (6, "m", ErrorCode.NONE)}
    assert await fetch_offsets(client, [(topic, 0), (topic, 1)]) == expected
    await broker.stop()
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    assert await fetch_offsets(client, [(topic, 0), (topic, 1)]) == expected


async def test_expiration_waits_for_pending_offsets_of_the_partition(start_broker) -> None:
    from broker.group.test_groups import commit

    broker = await start_broker(**FAST)
    client = await broker.connect()
    topic = await _topic(client)
    await commit(client, {(topic, 0): (3, "old"), (topic, 1): (4, "old")})
    pid, epoch = await _init_ok(client, TXN)
    await _add_offsets(client, pid, epoch)
    await _txn_commit(client, pid, epoch, {(topic, 0): 5})
    # Kafka 4's rule: an offset with a pending transactional one for its partition does not expire yet.
    await broker.node.groups.expire_offsets(10**15)
    assert await fetch_offsets(client, [(topic, 0), (topic, 1)]) == {
        (topic, 0): (3, "old", ErrorCode.NONE),
        (topic, 1): (-1, "", ErrorCode.NONE),
    }
    assert await _end(client, pid, epoch, True, TXN) == ErrorCode.NONE
    assert (await fetch_offsets(client, [(topic, 0)]))[(topic, 0)] == (5, "m", ErrorCode.NONE)


async def test_an_abort_marker_during_the_offsets_append_leaves_no_pending_offsets(start_broker) -> None:
    """The producer is fenced (its transaction aborted, the marker in ``__consumer_offsets``) while its TxnOffsetCommit
    is appended and not yet durable: the offsets die with the transaction, instead of staying pending with no marker
    left to end them (OffsetFetch answered UNSTABLE_OFFSET_COMMIT for good: a DelayService taking a partition over
    stalled on it)."""
    broker = await start_broker(**FAST)
    client, fencer = await broker.connect(), await broker.connect()
    topic = await _topic(client)
    pid, epoch = await _init_ok(client, TXN)
    await _add_offsets(client, pid, epoch)
    group_log = broker.node.groups.group_log
    appended, release = trio.Event(), trio.Event()
    original = group_log.append

    async def slow_append(*args, **kwargs):
        result = await original(*args, **kwargs)
        if kwargs.get("producer_id", -1) >= 0:
            appended.set()
            await release.wait()
        return result

    group_log.append = slow_append
    answers = {}

    async def commit() -> None:
        answers.update(await _txn_commit(client, pid, epoch, {(topic, 0): 7}))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(commit)
        await appended.wait()
        assert (await _init_ok(fencer, TXN))[1] > epoch  # fences: the open transaction is aborted
        release.set()
    assert answers == {(topic, 0): ErrorCode.NONE}  # appended before the abort marker: aborted with it
    stable = await fetch_offsets(fencer, [(topic, 0)], require_stable=True)
    assert stable[(topic, 0)] == (-1, "", ErrorCode.NONE)
