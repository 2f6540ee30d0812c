"""Deleting a topic removes every group's committed offsets of it (Kafka's onPartitionsDeleted), durably and
before the topic goes, so a topic re-created under the same name starts without offsets, across restarts too."""

from __future__ import annotations

import trio
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.consumer_protocol import encode_subscription

from broker.group.test_group_txn import TXN, _add_offsets, _txn_commit
from broker.group.test_groups import FAST, GROUP, _topic, commit, describe, fetch_offsets
from broker.group.test_offset_delete import _stable_member
from broker.helpers import create_topic_body
from broker.txn.test_transactions import _end, _init_ok

UNSET = (-1, "", ErrorCode.NONE)


async def delete_topic(client, name: str) -> int:
    response = await client.request(ApiKey.DELETE_TOPICS, 4, {"topic_names": [name], "timeout_ms": 1000})
    return response.responses[0].error_code


async def listed_groups(client) -> set[str]:
    response = await client.request(ApiKey.LIST_GROUPS, 4, {"states_filter": []})
    return {g.group_id for g in response.groups}


async def _assert_doomed_offsets_gone(client, doomed: str, kept: str) -> None:
    assert await fetch_offsets(client, [(doomed, 0), (doomed, 1), (kept, 0)], group="simple") == {
        (doomed, 0): UNSET,
        (doomed, 1): UNSET,
        (kept, 0): (7, "k", ErrorCode.NONE),
    }
    # Every partition with an offset: the deleted topic's are not among them.
    assert await fetch_offsets(client, None, group="simple") == {(kept, 0): (7, "k", ErrorCode.NONE)}
    assert await fetch_offsets(client, [(doomed, 0), (kept, 0)], group="active") == {
        (doomed, 0): UNSET,
        (kept, 0): (8, "", ErrorCode.NONE),
    }
    # An Empty group whose only offsets were of the deleted topic is gone; the others stay.
    assert await listed_groups(client) == {"simple", "active"}
    assert (await describe(client, "only-doomed")).group_state == "Dead"
    assert (await describe(client, "active")).group_state == "Stable"


async def test_deleted_topic_offsets_are_gone_for_a_recreated_topic_and_after_restart(start_broker, tmp_path) -> None:
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    doomed, kept = await _topic(client, "doomed", 2), await _topic(client, "kept", 1)
    await commit(client, {(doomed, 0): (5, "a"), (doomed, 1): (6, "b"), (kept, 0): (7, "k")}, group="simple")
    await commit(client, {(doomed, 0): (3, "")}, group="only-doomed")
    await commit(client, {(doomed, 0): (4, ""), (kept, 0): (8, "")}, group="active")
    # Kafka removes the offsets of a deleted topic whatever the group's subscriptions.
    await _stable_member(client, "active", encode_subscription([doomed]))
    assert await listed_groups(client) == {"simple", "only-doomed", "active"}

    assert await delete_topic(client, doomed) == ErrorCode.NONE
    await _assert_doomed_offsets_gone(client, doomed, kept)
    # OffsetDelete can no longer reach them, and need not: a topic created again under the name starts clean.
    assert await _topic(client, doomed, 2) == doomed
    await _assert_doomed_offsets_gone(client, doomed, kept)

    await broker.stop()
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    await _assert_doomed_offsets_gone(client, doomed, kept)
    assert broker.node.groups.get("only-doomed") is None


async def test_pending_transactional_offsets_of_a_deleted_topic_are_dropped(start_broker, tmp_path) -> None:
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    doomed = await _topic(client, "doomed", 1)
    pid, epoch = await _init_ok(client, TXN)
    assert await _add_offsets(client, pid, epoch) == ErrorCode.NONE
    assert await _txn_commit(client, pid, epoch, {(doomed, 0): 5}) == {(doomed, 0): ErrorCode.NONE}
    assert await delete_topic(client, doomed) == ErrorCode.NONE
    # The Empty group has no offset left but a transaction with offsets still open: it stays (Kafka's hasOffsets).
    assert await listed_groups(client) == {GROUP}
    # Kafka 4's onPartitionsDeleted tombstones the pending offset too: the COMMIT marker has nothing to apply.
    assert await _end(client, pid, epoch, True, TXN) == ErrorCode.NONE
    await _topic(client, doomed, 1)
    assert await fetch_offsets(client, [(doomed, 0)], require_stable=True) == {(doomed, 0): UNSET}
    await broker.stop()
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    assert await fetch_offsets(client, [(doomed, 0)], require_stable=True) == {(doomed, 0): UNSET}


async def test_offsets_are_refused_while_the_deletion_writes_its_tombstones(start_broker) -> None:
    broker = await start_broker(**FAST)
    deleter, other = await broker.connect(), await broker.connect()
    doomed = await _topic(deleter, "doomed", 1)
    await commit(deleter, {(doomed, 0): (5, "")}, group="simple")
    group_log = broker.node.groups.group_log
    append, release, reached = group_log.append, trio.Event(), trio.Event()

    async def held_tombstones(group_id, records, **kwargs):
        if any(value is None for _, value in records):
            reached.set()
            await release.wait()
        return await append(group_id, records, **kwargs)

    group_log.append = held_tombstones
    async with trio.open_nursery() as nursery:
        result: list[int] = []

        async def run_deletion() -> None:
            result.append(await delete_topic(deleter, doomed))

        nursery.start_soon(run_deletion)
        with trio.fail_after(5):
            await reached.wait()
        # The topic still exists until its offsets are gone, but no new offset of it is taken.
        assert await commit(other, {(doomed, 0): (9, "")}, group="late") == {
            (doomed, 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        }
        response = await other.request(ApiKey.CREATE_TOPICS, 5, create_topic_body(doomed, 1))
        assert response.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
        release.set()
    assert result == [ErrorCode.NONE]
    await _topic(other, doomed, 1)
    assert await fetch_offsets(other, [(doomed, 0)], group="simple") == {(doomed, 0): UNSET}
    assert await fetch_offsets(other, [(doomed, 0)], group="late") == {(doomed, 0): UNSET}


async def test_topic_stays_when_its_offsets_cannot_be_removed(start_broker) -> None:
    broker = await start_broker(**FAST)
    client = await broker.connect()
    doomed = await _topic(client, "doomed", 1)
    await commit(client, {(doomed, 0): (5, "")}, group="simple")
    group_log = broker.node.groups.group_log

    async def failing_append(group_id, records, **kwargs):
        return ErrorCode.NOT_COORDINATOR, -1

    group_log.append = failing_append
    assert await delete_topic(client, doomed) == ErrorCode.KAFKA_STORAGE_ERROR
    assert broker.node.metadata.get(doomed) is not None
    assert await fetch_offsets(client, [(doomed, 0)], group="simple") == {(doomed, 0): (5, "", ErrorCode.NONE)}
    del group_log.append  # the class's method again
    assert await delete_topic(client, doomed) == ErrorCode.NONE
    assert broker.node.groups.get("simple") is None


async def test_offsets_of_missing_topics_are_removed_at_start(start_broker, tmp_path) -> None:
    """Offsets a former version kept after deleting their topic are tombstoned before the broker serves."""
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    gone, kept = await _topic(client, "gone", 2), await _topic(client, "kept", 1)
    await commit(client, {(gone, 0): (5, ""), (gone, 1): (6, ""), (kept, 0): (7, "")}, group="simple")
    await commit(client, {(gone, 1): (3, "")}, group="only-gone")
    broker.node.topics._remove(gone)  # the topic goes as it used to: its offsets stay in __consumer_offsets
    await broker.stop()

    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    assert broker.node.groups.get("only-gone") is None
    assert await fetch_offsets(client, None, group="simple") == {(kept, 0): (7, "", ErrorCode.NONE)}
    await _topic(client, gone, 2)
    await broker.stop()
    # The removal was durable: with the topic back, the next start has nothing to drop, and nothing comes back.
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    assert await fetch_offsets(client, [(gone, 0), (gone, 1)], group="simple") == {(gone, 0): UNSET, (gone, 1): UNSET}
    assert await listed_groups(client) == {"simple"}
