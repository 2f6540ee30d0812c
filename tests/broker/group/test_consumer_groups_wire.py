"""KIP-848 consumer groups through the wire: ConsumerGroupHeartbeat / ConsumerGroupDescribe, member epochs,
revocation before assignment, static membership, timeouts, offset commits with member epochs, and the type rules
between consumer and classic groups."""

from __future__ import annotations

import pytest
import trio
from oncelog.protocol import ApiKey, ErrorCode

from broker.group.test_groups import join
from broker.helpers import create_topic_body

GROUP = "cg"
FAST = {
    "group_initial_rebalance_delay_ms": "0",
    "group_min_session_timeout_ms": "100",
    "group_consumer_min_session_timeout_ms": "300",
    "group_consumer_session_timeout_ms": "600",
    "offsets_topic_num_partitions": "1",
}


@pytest.fixture
async def cbroker(start_broker):
    return await start_broker(**FAST)


async def _topic(client, name: str = "t", partitions: int = 4):
    response = await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body(name, partitions))
    assert response.topics[0].error_code == ErrorCode.NONE
    return response.topics[0].topic_id if "topic_id" in response.topics[0] else None


def _topic_id(broker, name: str = "t"):
    return broker.node.metadata.get(name).topic_id


async def hb(
    client,
    member_id: str,
    epoch: int,
    *,
    topics=None,
    owned=None,
    rebalance_ms: int = -1,
    instance=None,
    assignor=None,
    regex=None,
    group: str = GROUP,
    version: int = 1,
):
    body = {
        "group_id": group,
        "member_id": member_id,
        "member_epoch": epoch,
        "instance_id": instance,
        "rack_id": None,
        "rebalance_timeout_ms": rebalance_ms,
        "subscribed_topic_names": topics,
        "subscribed_topic_regex": regex,
        "server_assignor": assignor,
        "topic_partitions": owned,
    }
    return await client.request(ApiKey.CONSUMER_GROUP_HEARTBEAT, version, body)


async def join_consumer(client, member_id: str, topics=("t",), **kwargs):
    return await hb(client, member_id, 0, topics=list(topics), owned=[], rebalance_ms=5000, **kwargs)


def parts(response, topic_id) -> set[int]:
    assert response.assignment is not None
    return {p for t in response.assignment.topic_partitions if t.topic_id == topic_id for p in t.partitions}


def owned(topic_id, partitions) -> list[dict]:
    return [{"topic_id": topic_id, "partitions": sorted(partitions)}]


async def test_join_gets_every_partition_at_epoch_one(cbroker) -> None:
    client = await cbroker.connect()
    await _topic(client)
    tid = _topic_id(cbroker)
    r = await join_consumer(client, "m1")
    assert r.error_code == ErrorCode.NONE and r.member_id == "m1" and r.member_epoch == 1
    assert parts(r, tid) == {0, 1, 2, 3}
    assert r.heartbeat_interval_ms == 5000
    # A plain heartbeat at the same epoch: nothing changed, no assignment sent.
    r = await hb(client, "m1", 1)
    assert r.error_code == ErrorCode.NONE and r.member_epoch == 1 and r.assignment is None


async def test_v0_member_without_id_gets_one(cbroker) -> None:
    client = await cbroker.connect()
    await _topic(client)
    r = await join_consumer(client, "", version=0)
    assert r.error_code == ErrorCode.NONE and r.member_id and r.member_epoch == 1
    r = await join_consumer(client, "", version=1)
    assert r.error_code == ErrorCode.INVALID_REQUEST


async def test_second_member_waits_for_revocation(cbroker) -> None:
    client = await cbroker.connect()
    await _topic(client)
    tid = _topic_id(cbroker)
    r1 = await join_consumer(client, "m1")
    assert parts(r1, tid) == {0, 1, 2, 3}
    r2 = await join_consumer(client, "m2")
    # m2 is at epoch 2 but gets nothing yet: m1 still holds everything.
    assert r2.member_epoch == 2 and parts(r2, tid) == set()
    # m1 is told to keep two partitions (revoke the others) and stays at epoch 1.
    r1 = await hb(client, "m1", 1, owned=owned(tid, {0, 1, 2, 3}))
    assert r1.member_epoch == 1
    kept = parts(r1, tid)
    assert len(kept) == 2
    # m2 still gets nothing while m1 has not acknowledged.
    r2 = await hb(client, "m2", 2, owned=owned(tid, set()))
    assert r2.assignment is None or parts(r2, tid) == set()
    described = await client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [GROUP]})
    assert described.groups[0].group_state == "Reconciling"
    # m1 acknowledges: it moves to epoch 2; then m2 receives the released partitions.
    r1 = await hb(client, "m1", 1, owned=owned(tid, kept))
    assert r1.member_epoch == 2
    r2 = await hb(client, "m2", 2, owned=owned(tid, set()))
    assert parts(r2, tid) == {0, 1, 2, 3} - kept
    described = await client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [GROUP]})
    group = described.groups[0]
    assert (group.error_code, group.group_state, group.group_epoch, group.assignment_epoch) == (0, "Stable", 2, 2)
    assert group.assignor_name == "uniform"
    assert sorted(m.member_id for m in group.members) == ["m1", "m2"]
    # m2 leaves: m1 gets everything back at epoch 3.
    r = await hb(client, "m2", -1)
    assert r.error_code == ErrorCode.NONE and r.member_epoch == -1
    r1 = await hb(client, "m1", 2, owned=owned(tid, kept))
    assert r1.member_epoch == 3 and parts(r1, tid) == {0, 1, 2, 3}


async def test_epoch_checks_and_validation(cbroker) -> None:
    client = await cbroker.connect()
    await _topic(client)
    await join_consumer(client, "m1")
    assert (await hb(client, "m1", 5)).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert (await hb(client, "nobody", 1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert (await hb(client, "m1", -3)).error_code == ErrorCode.INVALID_REQUEST
    assert (await hb(client, "m1", 0, topics=["t"], owned=[])).error_code == ErrorCode.INVALID_REQUEST  # no timeout
    assert (await hb(client, "m1", 0, rebalance_ms=1000, owned=[])).error_code == ErrorCode.INVALID_REQUEST
    assert (await join_consumer(client, "m9", assignor="sticky")).error_code == ErrorCode.UNSUPPORTED_ASSIGNOR
    assert (await join_consumer(client, "m9", regex="(")).error_code == ErrorCode.INVALID_REGULAR_EXPRESSION
    assert (await hb(client, "m1", -2)).error_code == ErrorCode.INVALID_REQUEST  # static leave needs an instance
    assert (await hb(client, "m9", -1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert (await hb(client, "m1", -1, group="nope")).error_code == ErrorCode.GROUP_ID_NOT_FOUND
    assert (await hb(client, "m1", 1, group="nope")).error_code == ErrorCode.GROUP_ID_NOT_FOUND


async def test_range_assignor_and_regex_subscription(cbroker) -> None:
    client = await cbroker.connect()
    await _topic(client, "t", 3)
    await _topic(client, "other", 2)
    tid = _topic_id(cbroker)
    r = await hb(client, "b", 0, regex="t|nothing", owned=[], rebalance_ms=1000, assignor="range")
    assert r.error_code == ErrorCode.NONE and parts(r, tid) == {0, 1, 2}
    assert parts(r, _topic_id(cbroker, "other")) == set()
    r = await hb(client, "a", 0, topics=["t"], owned=[], rebalance_ms=1000, assignor="range")
    # Range: "a" sorts first and takes partitions 0-1 once "b" released them.
    r = await hb(client, "b", 1, owned=owned(tid, {0, 1, 2}))
    assert parts(r, tid) == {2}
    r = await hb(client, "b", 1, owned=owned(tid, {2}))
    r = await hb(client, "a", 2, owned=[])
    assert parts(r, tid) == {0, 1}
    described = await client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [GROUP]})
    assert described.groups[0].assignor_name == "range"


async def test_static_member_leaves_and_returns_with_its_partitions(cbroker) -> None:
    client = await cbroker.connect()
    await _topic(client)
    tid = _topic_id(cbroker)
    r = await join_consumer(client, "s1", instance="i1")
    assert parts(r, tid) == {0, 1, 2, 3}
    assert (await join_consumer(client, "s2", instance="i1")).error_code == ErrorCode.UNRELEASED_INSTANCE_ID
    r = await hb(client, "s1", -2, instance="i1")
    assert r.error_code == ErrorCode.NONE and r.member_epoch == -2
    r = await join_consumer(client, "s2", instance="i1")
    assert r.error_code == ErrorCode.NONE and r.member_epoch == 1 and parts(r, tid) == {0, 1, 2, 3}
    described = await client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [GROUP]})
    assert described.groups[0].group_epoch == 1  # no rebalance
    assert [(m.member_id, m.instance_id) for m in described.groups[0].members] == [("s2", "i1")]


async def test_session_timeout_removes_member_and_frees_its_partitions(cbroker) -> None:
    client = await cbroker.connect()
    await _topic(client)
    tid = _topic_id(cbroker)
    await join_consumer(client, "gone")
    r = await join_consumer(client, "live")
    assert parts(r, tid) == set()
    with trio.fail_after(10):
        while True:
            await trio.sleep(0.2)
            r = await hb(client, "live", r.member_epoch, owned=owned(tid, parts(r, tid) if r.assignment else set()))
            if r.assignment is not None and parts(r, tid) == {0, 1, 2, 3}:
                break
    assert (await hb(client, "gone", 1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_rebalance_timeout_fences_a_member_that_does_not_revoke(cbroker) -> None:
    client = await cbroker.connect()
    await _topic(client)
    tid = _topic_id(cbroker)
    await hb(client, "slow", 0, topics=["t"], owned=[], rebalance_ms=300)
    await hb(client, "new", 0, topics=["t"], owned=[], rebalance_ms=300)
    r = await hb(client, "slow", 1, owned=owned(tid, {0, 1, 2, 3}))
    assert len(parts(r, tid)) == 2
    # "slow" heartbeats (keeping its session) but never gives up the revoked partitions.
    with trio.fail_after(10):
        while (r := await hb(client, "slow", 1, owned=owned(tid, {0, 1, 2, 3}))).error_code == ErrorCode.NONE:
            await trio.sleep(0.1)
    assert r.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    r = await hb(client, "new", 2, owned=[])
    assert parts(r, tid) == {0, 1, 2, 3}


def _commit_body(member_id: str, epoch: int, offset: int = 5) -> dict:
    return {
        "group_id": GROUP,
        "generation_id_or_member_epoch": epoch,
        "member_id": member_id,
        "group_instance_id": None,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": offset}]}],
    }


async def test_offset_commit_checks_member_epoch(cbroker) -> None:
    client = await cbroker.connect()
    await _topic(client)
    await join_consumer(client, "m1")

    async def commit(member_id, epoch, version=9, offset=5):
        r = await client.request(ApiKey.OFFSET_COMMIT, version, _commit_body(member_id, epoch, offset))
        return r.topics[0].partitions[0].error_code

    assert await commit("m1", 0) == ErrorCode.STALE_MEMBER_EPOCH
    assert await commit("m1", 2) == ErrorCode.STALE_MEMBER_EPOCH
    assert await commit("other", 1) == ErrorCode.UNKNOWN_MEMBER_ID
    assert await commit("m1", 1, version=8) == ErrorCode.UNSUPPORTED_VERSION
    assert await commit("", -1) == ErrorCode.UNKNOWN_MEMBER_ID  # the group has members
    assert await commit("m1", 1, offset=7) == ErrorCode.NONE
    fetched = await client.request(
        ApiKey.OFFSET_FETCH,
        7,
        {"group_id": GROUP, "topics": [{"name": "t", "partition_indexes": [0]}], "require_stable": False},
    )
    assert fetched.topics[0].partitions[0].committed_offset == 7
    await hb(client, "m1", -1)
    assert await commit("", -1, offset=9) == ErrorCode.NONE  # empty group: an admin's commit


async def test_group_types_and_protocol_switch(cbroker) -> None:
    client = await cbroker.connect()
    await _topic(client)
    await join_consumer(client, "m1")
    r = await join(client, group=GROUP)
    assert r.error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL
    listed = await client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["consumer"]})
    assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [(GROUP, "consumer", "Stable")]
    listed = await client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": ["classic"]})
    assert listed.groups == []
    described = await client.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [GROUP]})
    assert described.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND
    # Offsets committed now stay when the (empty) group switches to classic.
    r = await client.request(ApiKey.OFFSET_COMMIT, 9, _commit_body("m1", 1, 11))
    assert r.topics[0].partitions[0].error_code == ErrorCode.NONE
    assert (await hb(client, "m1", -1)).error_code == ErrorCode.NONE
    r = await join(client, group=GROUP)
    assert r.error_code == ErrorCode.NONE
    classic_member = r.member_id
    listed = await client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert [(g.group_id, g.group_type) for g in listed.groups] == [(GROUP, "classic")]
    # A non-empty classic group refuses consumer members.
    r = await join_consumer(client, "m2")
    assert r.error_code == ErrorCode.GROUP_ID_NOT_FOUND
    described = await client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [GROUP, "nope"]})
    assert [g.error_code for g in described.groups] == [ErrorCode.GROUP_ID_NOT_FOUND] * 2
    fetched = await client.request(
        ApiKey.OFFSET_FETCH,
        7,
        {"group_id": GROUP, "topics": [{"name": "t", "partition_indexes": [0]}], "require_stable": False},
    )
    assert fetched.topics[0].partitions[0].committed_offset == 11
    left = await client.request(ApiKey.LEAVE_GROUP, 4, {"group_id": GROUP, "members": [{"member_id": classic_member}]})
    assert left.error_code == ErrorCode.NONE
    assert (await join_consumer(client, "m3")).error_code == ErrorCode.NONE


async def test_delete_consumer_group(cbroker) -> None:
    client = await cbroker.connect()
    await _topic(client)
    await join_consumer(client, "m1")
    r = await client.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": [GROUP]})
    assert r.results[0].error_code == ErrorCode.NON_EMPTY_GROUP
    await hb(client, "m1", -1)
    r = await client.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": [GROUP]})
    assert r.results[0].error_code == ErrorCode.NONE
    listed = await client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert listed.groups == []


async def test_group_survives_a_restart_with_epochs_and_assignments(start_broker, tmp_path) -> None:
    data = tmp_path / "kept"
    broker = await start_broker(data_dir=data, **FAST)
    client = await broker.connect()
    await _topic(client)
    tid = _topic_id(broker)
    await join_consumer(client, "m1")
    await join_consumer(client, "m2")
    r1 = await hb(client, "m1", 1, owned=owned(tid, {0, 1, 2, 3}))
    kept = parts(r1, tid)
    # m1 is mid-revocation (epoch 1, two partitions pending) when the broker stops.
    await broker.stop()
    broker = await start_broker(data_dir=data, **FAST)
    client = await broker.connect()
    described = await client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [GROUP]})
    group = described.groups[0]
    assert (group.error_code, group.group_epoch, group.assignment_epoch) == (0, 2, 2)
    assert {m.member_id: m.member_epoch for m in group.members} == {"m1": 1, "m2": 2}
    # m2 still waits for m1's revocation; m1 acknowledges; m2 gets the rest: no partition was handed out twice.
    r2 = await hb(client, "m2", 2, owned=[])
    assert r2.assignment is None or parts(r2, tid) == set()
    r1 = await hb(client, "m1", 1, owned=owned(tid, kept))
    assert r1.error_code == ErrorCode.NONE and r1.member_epoch == 2
    r2 = await hb(client, "m2", 2, owned=[])
    assert parts(r2, tid) == {0, 1, 2, 3} - kept
    # A new member takes the next group epoch, not one handed out before the restart.
    assert (await join_consumer(client, "m3")).member_epoch == 3
    # A deleted group does not come back.
    for member in ("m1", "m2", "m3"):
        assert (await hb(client, member, -1)).error_code == ErrorCode.NONE
    r = await client.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": [GROUP]})
    assert r.results[0].error_code == ErrorCode.NONE
    await broker.stop()
    broker = await start_broker(data_dir=data, **FAST)
    client = await broker.connect()
    described = await client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [GROUP]})
    assert described.groups[0].error_code == ErrorCode.GROUP_ID_NOT_FOUND


async def test_group_configs_set_heartbeat_interval_and_session_timeout(cbroker) -> None:
    """The GROUP config resource's consumer.heartbeat.interval.ms / consumer.session.timeout.ms apply to the group."""
    from broker.apis.test_alter_configs import SET, _alter_group

    client = await cbroker.connect()
    await _topic(client)
    tid = _topic_id(cbroker)
    error, _ = await _alter_group(
        client, GROUP, ("consumer.heartbeat.interval.ms", SET, "6000"), ("consumer.session.timeout.ms", SET, "400")
    )
    assert error == ErrorCode.NONE
    assert (await join_consumer(client, "m1")).heartbeat_interval_ms == 6000
    await join_consumer(client, "m2")
    with trio.fail_after(10):  # m1 stops heartbeating: it is gone after 400 ms, not the broker's 600 ms
        r = await hb(client, "m2", 2, owned=[])
        while r.assignment is None or parts(r, tid) != {0, 1, 2, 3}:
            await trio.sleep(0.05)
            r = await hb(client, "m2", r.member_epoch, owned=owned(tid, parts(r, tid)) if r.assignment else None)


async def test_static_replacement_survives_a_restart(start_broker, tmp_path) -> None:
    data = tmp_path / "kept"
    broker = await start_broker(data_dir=data, **FAST)
    client = await broker.connect()
    await _topic(client)
    tid = _topic_id(broker)
    await join_consumer(client, "s1", instance="i1")
    await hb(client, "s1", -2, instance="i1")
    assert parts(await join_consumer(client, "s2", instance="i1"), tid) == {0, 1, 2, 3}
    await broker.stop()
    broker = await start_broker(data_dir=data, **FAST)
    client = await broker.connect()
    described = await client.request(ApiKey.CONSUMER_GROUP_DESCRIBE, 0, {"group_ids": [GROUP]})
    assert [(m.member_id, m.instance_id, m.member_epoch) for m in described.groups[0].members] == [("s2", "i1", 1)]
    assert (await hb(client, "s1", 1)).error_code == ErrorCode.UNKNOWN_MEMBER_ID
    assert (await hb(client, "s2", 1, owned=owned(tid, {0, 1, 2, 3}))).error_code == ErrorCode.NONE


async def test_txn_offset_commit_checks_member_epoch(cbroker) -> None:
    """TxnOffsetCommit of a consumer group: the member epoch as generation (ILLEGAL_GENERATION when stale, as
    Kafka's OffsetMetadataManager maps STALE_MEMBER_EPOCH for it), UNKNOWN_MEMBER_ID, pending until the marker."""
    from broker.group.test_group_txn import GROUP as TXN_GROUP
    from broker.group.test_group_txn import TXN, _add_offsets, _txn_commit
    from broker.group.test_groups import fetch_offsets
    from broker.txn.test_transactions import _end, _init_ok

    client = await cbroker.connect()
    await _topic(client)
    assert (await join_consumer(client, "m1", group=TXN_GROUP)).member_epoch == 1
    pid, epoch = await _init_ok(client, TXN)
    assert await _add_offsets(client, pid, epoch, TXN_GROUP) == ErrorCode.NONE
    offsets = {("t", 0): 4}
    assert await _txn_commit(client, pid, epoch, offsets, generation=2, member_id="m1") == {
        ("t", 0): ErrorCode.ILLEGAL_GENERATION
    }
    assert await _txn_commit(client, pid, epoch, offsets, generation=1, member_id="x") == {
        ("t", 0): ErrorCode.UNKNOWN_MEMBER_ID
    }
    assert await _txn_commit(client, pid, epoch, offsets, generation=1, member_id="m1") == {("t", 0): ErrorCode.NONE}
    assert await _end(client, pid, epoch, True, TXN) == ErrorCode.NONE
    fetched = await fetch_offsets(client, [("t", 0)], require_stable=True)
    assert fetched[("t", 0)][0] == 4


async def test_offset_delete_and_expiry_keep_the_subscribed_topics_of_a_consumer_group(cbroker) -> None:
    """Kafka's ConsumerGroup: OffsetDelete answers GROUP_SUBSCRIBED_TO_TOPIC for its members' topics, and expiry (from
    the commit) spares them; other topics' offsets go."""
    from broker.group.test_groups import fetch_offsets
    from broker.group.test_offset_delete import delete_offsets as _delete

    client = await cbroker.connect()
    await _topic(client, "t")
    await _topic(client, "old")
    await join_consumer(client, "m1")
    for topic in ("t", "old"):
        body = _commit_body("m1", 1)
        body["topics"][0]["name"] = topic
        r = await client.request(ApiKey.OFFSET_COMMIT, 9, body)
        assert r.topics[0].partitions[0].error_code == ErrorCode.NONE
    error, per_partition = await _delete(client, GROUP, [("t", 0)])
    assert (error, per_partition) == (ErrorCode.NONE, {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC})
    await cbroker.node.groups.expire_offsets(10**15)
    fetched = await fetch_offsets(client, [("t", 0), ("old", 0)], group=GROUP)
    assert fetched[("t", 0)][0] == 5 and fetched[("old", 0)][0] == -1
    error, per_partition = await _delete(client, GROUP, [("old", 1)])
    assert error == ErrorCode.NONE
    listed = await client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [], "types_filter": []})
    assert [(g.group_id, g.group_type) for g in listed.groups] == [(GROUP, "consumer")]
