"""The group coordinator through the wire: join round trip, rebalances, expiry, fencing, offsets, restart."""

from __future__ import annotations

import pytest
import trio
from oncelog.protocol import ApiKey, ErrorCode

from broker.helpers import create_topic_body

GROUP = "g1"
FAST = {"group_initial_rebalance_delay_ms": "0", "group_min_session_timeout_ms": "100"}


@pytest.fixture
async def gbroker(start_broker):
    return await start_broker(**FAST)


async def _topic(client, name: str = "t", partitions: int = 4) -> str:
    response = await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body(name, partitions))
    assert response.topics[0].error_code == ErrorCode.NONE
    return name


def join_body(
    member_id: str = "",
    *,
    session_ms: int = 10000,
    rebalance_ms: int = 10000,
    instance=None,
    protocols=(("range", b"r"),),
    group: str = GROUP,
    protocol_type: str = "consumer",
) -> dict:
    return {
        "group_id": group,
        "session_timeout_ms": session_ms,
        "rebalance_timeout_ms": rebalance_ms,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": protocol_type,
        "protocols": [{"name": n, "metadata": m} for n, m in protocols],
    }


async def join(client, member_id: str = "", version: int = 5, **kwargs):
    """JoinGroup including the MEMBER_ID_REQUIRED round trip for dynamic members."""
    response = await client.request(ApiKey.JOIN_GROUP, version, join_body(member_id, **kwargs))
    if response.error_code == ErrorCode.MEMBER_ID_REQUIRED:
        assert response.member_id
        response = await client.request(ApiKey.JOIN_GROUP, version, join_body(response.member_id, **kwargs))
    return response


async def sync(client, generation: int, member_id: str, assignments=None, instance=None, group: str = GROUP):
    body = {
        "group_id": group,
        "generation_id": generation,
        "member_id": member_id,
        "group_instance_id": instance,
        "assignments": [{"member_id": m, "assignment": a} for m, a in (assignments or {}).items()],
    }
    return await client.request(ApiKey.SYNC_GROUP, 3, body)


async def heartbeat(client, generation: int, member_id: str, instance=None) -> int:
    body = {"group_id": GROUP, "generation_id": generation, "member_id": member_id, "group_instance_id": instance}
    return (await client.request(ApiKey.HEARTBEAT, 3, body)).error_code


async def commit(
    client, offsets: dict, generation: int = -1, member_id: str = "", version: int = 8, group: str = GROUP
) -> dict:
    body = {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member_id,
        "topics": [
            {"name": t, "partitions": [{"partition_index": p, "committed_offset": o, "committed_metadata": m}]}
            for (t, p), (o, m) in offsets.items()
        ],
    }
    response = await client.request(ApiKey.OFFSET_COMMIT, version, body)
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def fetch_offsets(client, partitions=None, *, require_stable: bool = False, group: str = GROUP) -> dict:
    topics = None
    if partitions is not None:
        by_topic: dict[str, list[int]] = {}
        for t, p in partitions:
            by_topic.setdefault(t, []).append(p)
        topics = [{"name": t, "partition_indexes": ps} for t, ps in by_topic.items()]
    body = {"group_id": group, "topics": topics, "require_stable": require_stable}
    response = await client.request(ApiKey.OFFSET_FETCH, 7, body)
    assert response.error_code == ErrorCode.NONE
    return {
        (t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
        for t in response.topics
        for p in t.partitions
    }


async def describe(client, group: str = GROUP):
    response = await client.request(ApiKey.DESCRIBE_GROUPS, 5, {"groups": [group]})
    return response.groups[0]


async def test_single_member_round_trip(gbroker) -> None:
    client = await gbroker.connect()
    first = await client.request(ApiKey.JOIN_GROUP, 5, join_body())
    assert first.error_code == ErrorCode.MEMBER_ID_REQUIRED and first.member_id.startswith("wire-test-")
    joined = await client.request(ApiKey.JOIN_GROUP, 5, join_body(first.member_id))
    assert joined.error_code == ErrorCode.NONE
    assert (joined.generation_id, joined.protocol_name, joined.leader) == (1, "range", first.member_id)
    assert [(m.member_id, m.metadata) for m in joined.members] == [(first.member_id, b"r")]
    synced = await sync(client, 1, first.member_id, {first.member_id: b"assignment"})
    assert (synced.error_code, synced.assignment) == (ErrorCode.NONE, b"assignment")
    assert await heartbeat(client, 1, first.member_id) == ErrorCode.NONE
    assert await heartbeat(client, 0, first.member_id) == ErrorCode.ILLEGAL_GENERATION
    assert await heartbeat(client, 1, "nobody") == ErrorCode.UNKNOWN_MEMBER_ID
    described = await describe(client)
    assert (described.group_state, described.protocol_type, described.protocol_data) == ("Stable", "consumer", "range")
    assert described.members[0].member_assignment == b"assignment"
    listed = await client.request(ApiKey.LIST_GROUPS, 4, {"states_filter": ["stable"]})
    assert [(g.group_id, g.group_state) for g in listed.groups] == [(GROUP, "Stable")]
    # v5 (KIP-848): every group here is "classic"; the types filter is case-insensitive, unknown types match none.
    for types, expected in (([], [GROUP]), (["Classic"], [GROUP]), (["consumer"], []), (["bogus"], [])):
        listed = await client.request(ApiKey.LIST_GROUPS, 5, {"states_filter": [" STABLE "], "types_filter": types})
        assert [(g.group_id, g.group_type) for g in listed.groups] == [(group, "classic") for group in expected]


async def test_old_join_versions_need_no_member_id_round_trip(gbroker) -> None:
    client = await gbroker.connect()
    response = await client.request(ApiKey.JOIN_GROUP, 0, join_body())
    assert response.error_code == ErrorCode.NONE and response.generation_id == 1 and response.member_id


async def test_invalid_session_timeout_and_group_id(gbroker) -> None:
    client = await gbroker.connect()
    response = await client.request(ApiKey.JOIN_GROUP, 5, join_body(session_ms=10))
    assert response.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    response = await client.request(ApiKey.JOIN_GROUP, 5, join_body(session_ms=3_600_000))
    assert response.error_code == ErrorCode.INVALID_SESSION_TIMEOUT
    response = await client.request(ApiKey.JOIN_GROUP, 5, join_body(group=""))
    assert response.error_code == ErrorCode.INVALID_GROUP_ID


async def test_protocol_selection_by_votes(start_broker) -> None:
    # The initial rebalance delay (Kafka's way of letting the first members join together) makes the three
    # concurrent joins one generation however the broker interleaves them.
    gbroker = await start_broker(**{**FAST, "group_initial_rebalance_delay_ms": "300"})
    a, b, c = [await gbroker.connect() for _ in range(3)]
    results: dict[str, object] = {}

    async def run(name, client, protocols):
        results[name] = await join(client, protocols=protocols)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run, "a", a, (("range", b"1"), ("roundrobin", b"2")))
        nursery.start_soon(run, "b", b, (("roundrobin", b"3"), ("range", b"4")))
        nursery.start_soon(run, "c", c, (("range", b"5"), ("roundrobin", b"6"), ("sticky", b"7")))
    # range and roundrobin are supported by everyone; range has two first-choice votes.
    assert {r.protocol_name for r in results.values()} == {"range"}
    assert len({r.generation_id for r in results.values()}) == 1
    d = await gbroker.connect()
    assert (await join(d, protocols=(("sticky", b""),))).error_code == ErrorCode.INCONSISTENT_GROUP_PROTOCOL


async def _two_members(gbroker):
    """Two members joined and synced: (clients, member ids, generation)."""
    a, b = await gbroker.connect(), await gbroker.connect()
    first = await join(a)
    assert first.generation_id == 1
    await sync(a, 1, first.member_id, {first.member_id: b"all"})
    results = {}

    async def rejoin_a():
        # a learns of the rebalance through its heartbeat, then rejoins.
        while await heartbeat(a, 1, first.member_id) != ErrorCode.REBALANCE_IN_PROGRESS:
            await trio.sleep(0.01)
        results["a"] = await join(a, first.member_id)

    async def join_b():
        results["b"] = await join(b)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(rejoin_a)
        nursery.start_soon(join_b)
    ra, rb = results["a"], results["b"]
    assert ra.generation_id == rb.generation_id == 2
    assert ra.leader == first.member_id and len(ra.members) == 2 and rb.members == []
    leader_sync = {first.member_id: b"p0,p1", rb.member_id: b"p2,p3"}
    synced: dict = {}

    async def sync_one(name, client, member_id, assignments):
        synced[name] = await sync(client, 2, member_id, assignments)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(sync_one, "b", b, rb.member_id, None)
        await trio.sleep(0.05)  # the follower waits for the leader's assignment
        nursery.start_soon(sync_one, "a", a, first.member_id, leader_sync)
    assert synced["a"].assignment == b"p0,p1" and synced["b"].assignment == b"p2,p3"
    return (a, b), (first.member_id, rb.member_id), 2


async def test_two_members_and_rebalance_on_leave(gbroker) -> None:
    (a, b), (ma, mb), generation = await _two_members(gbroker)
    response = await b.request(ApiKey.LEAVE_GROUP, 3, {"group_id": GROUP, "members": [{"member_id": mb}]})
    assert response.error_code == ErrorCode.NONE and response.members[0].error_code == ErrorCode.NONE
    assert await heartbeat(a, generation, ma) == ErrorCode.REBALANCE_IN_PROGRESS
    rejoined = await join(a, ma)
    assert rejoined.generation_id == generation + 1 and [m.member_id for m in rejoined.members] == [ma]
    # The old generation is refused once the new one exists.
    assert (await sync(a, generation, ma)).error_code == ErrorCode.ILLEGAL_GENERATION
    response = await b.request(ApiKey.LEAVE_GROUP, 1, {"group_id": GROUP, "member_id": mb})
    assert response.error_code == ErrorCode.UNKNOWN_MEMBER_ID


async def test_session_timeout_expires_a_member(gbroker) -> None:
    a, b = await gbroker.connect(), await gbroker.connect()
    first = await join(a, session_ms=300)
    await sync(a, 1, first.member_id, {})
    # b joins; a never heartbeats: its session expires and the rebalance completes without it.
    with trio.fail_after(5):
        second = await join(b, session_ms=10000)
    assert second.error_code == ErrorCode.NONE and [m.member_id for m in second.members] == [second.member_id]
    assert second.leader == second.member_id
    assert await heartbeat(a, 1, first.member_id) == ErrorCode.UNKNOWN_MEMBER_ID


async def test_last_member_expiry_leaves_group_empty(gbroker) -> None:
    client = await gbroker.connect()
    joined = await join(client, session_ms=200)
    await sync(client, 1, joined.member_id, {})
    with trio.fail_after(5):
        while (await describe(client)).group_state != "Empty":
            await trio.sleep(0.05)
    assert await heartbeat(client, 1, joined.member_id) == ErrorCode.UNKNOWN_MEMBER_ID


async def test_static_member_rejoins_without_rebalance_and_fences_old_id(gbroker) -> None:
    a, b = await gbroker.connect(), await gbroker.connect()
    first = await join(a, instance="instance-a")
    assert first.error_code == ErrorCode.NONE  # static members need no member id round trip
    await sync(a, 1, first.member_id, {first.member_id: b"x"}, instance="instance-a")
    # The same instance restarts: a new member id, same generation, no rebalance.
    again = await join(b, instance="instance-a")
    assert again.error_code == ErrorCode.NONE and again.member_id != first.member_id
    assert again.generation_id == 1 and again.members == []
    synced = await sync(b, 1, again.member_id, instance="instance-a")
    assert (synced.error_code, synced.assignment) == (ErrorCode.NONE, b"x")
    assert (await describe(a)).group_state == "Stable"
    assert await heartbeat(a, 1, first.member_id, instance="instance-a") == ErrorCode.FENCED_INSTANCE_ID
    assert await heartbeat(b, 1, again.member_id, instance="instance-a") == ErrorCode.NONE
    errors = await commit(a, {("t", 0): (1, "")}, generation=1, member_id=first.member_id)
    assert set(errors.values()) == {ErrorCode.UNKNOWN_MEMBER_ID}


async def test_offsets_commit_fetch_and_member_checks(gbroker) -> None:
    client = await gbroker.connect()
    topic = await _topic(client)
    # A group that only stores offsets: generation -1, no member.
    errors = await commit(client, {(topic, 0): (42, "meta"), (topic, 1): (7, None)})
    assert set(errors.values()) == {ErrorCode.NONE}
    fetched = await fetch_offsets(client, [(topic, 0), (topic, 1), (topic, 2)])
    assert fetched == {
        (topic, 0): (42, "meta", ErrorCode.NONE),
        (topic, 1): (7, "", ErrorCode.NONE),
        (topic, 2): (-1, "", ErrorCode.NONE),
    }
    assert set(await fetch_offsets(client)) == {(topic, 0), (topic, 1)}  # null topics: all committed
    assert (await commit(client, {("nope", 0): (1, "")}))[("nope", 0)] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    too_big = await commit(client, {(topic, 0): (1, "m" * 5000)})
    assert too_big[(topic, 0)] == ErrorCode.OFFSET_METADATA_TOO_LARGE
    joined = await join(client)
    await sync(client, joined.generation_id, joined.member_id, {})
    errors = await commit(client, {(topic, 0): (50, "")}, generation=joined.generation_id, member_id=joined.member_id)
    assert errors[(topic, 0)] == ErrorCode.NONE
    bad_gen = await commit(client, {(topic, 0): (1, "")}, generation=99, member_id=joined.member_id)
    assert bad_gen[(topic, 0)] == ErrorCode.ILLEGAL_GENERATION
    unknown = await commit(client, {(topic, 0): (1, "")}, generation=joined.generation_id, member_id="x")
    assert unknown[(topic, 0)] == ErrorCode.UNKNOWN_MEMBER_ID
    simple = await commit(client, {(topic, 0): (1, "")})  # the group has members now
    assert simple[(topic, 0)] == ErrorCode.UNKNOWN_MEMBER_ID
    assert (await fetch_offsets(client, [(topic, 0)]))[(topic, 0)][0] == 50
    unknown_group = await commit(client, {(topic, 0): (1, "")}, generation=3, group="other")
    assert unknown_group[(topic, 0)] == ErrorCode.ILLEGAL_GENERATION


async def test_delete_groups(gbroker) -> None:
    client = await gbroker.connect()
    topic = await _topic(client)
    await commit(client, {(topic, 0): (5, "")}, group="simple")
    joined = await join(client)
    response = await client.request(ApiKey.DELETE_GROUPS, 2, {"groups_names": ["simple", GROUP, "missing"]})
    assert [(r.group_id, r.error_code) for r in response.results] == [
        ("simple", ErrorCode.NONE),
        (GROUP, ErrorCode.NON_EMPTY_GROUP),
        ("missing", ErrorCode.GROUP_ID_NOT_FOUND),
    ]
    assert await fetch_offsets(client, [(topic, 0)], group="simple") == {(topic, 0): (-1, "", ErrorCode.NONE)}
    assert (await describe(client, "simple")).group_state == "Dead"
    assert joined.error_code == ErrorCode.NONE


async def test_offsets_and_group_survive_restart(start_broker, tmp_path) -> None:
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    topic = await _topic(client)
    await commit(client, {(topic, 0): (11, "a")}, group="simple")
    joined = await join(client, instance="inst")
    await sync(client, 1, joined.member_id, {joined.member_id: b"assigned"}, instance="inst")
    await commit(client, {(topic, 1): (22, "b")}, generation=1, member_id=joined.member_id)
    await broker.stop()
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    assert (await fetch_offsets(client, [(topic, 0)], group="simple"))[(topic, 0)] == (11, "a", ErrorCode.NONE)
    assert (await fetch_offsets(client, [(topic, 1)]))[(topic, 1)] == (22, "b", ErrorCode.NONE)
    described = await describe(client)
    assert described.group_state == "Stable" and described.members[0].member_id == joined.member_id
    # The member carries on with its generation; the static instance id is still fenced correctly.
    assert await heartbeat(client, 1, joined.member_id, instance="inst") == ErrorCode.NONE
    assert await heartbeat(client, 1, "other", instance="inst") == ErrorCode.FENCED_INSTANCE_ID


async def test_offset_expiration_of_empty_groups(gbroker) -> None:
    client = await gbroker.connect()
    topic = await _topic(client)
    await commit(client, {(topic, 0): (3, "")}, group="old")
    coordinator = gbroker.node.groups
    await coordinator.expire_offsets(coordinator.get("old").offsets[(topic, 0)].value.commit_timestamp_ms + 1000)
    assert coordinator.get("old") is not None  # within offsets.retention.minutes
    await coordinator.expire_offsets(10**15)
    assert coordinator.get("old") is None
    assert await fetch_offsets(client, [(topic, 0)], group="old") == {(topic, 0): (-1, "", ErrorCode.NONE)}
