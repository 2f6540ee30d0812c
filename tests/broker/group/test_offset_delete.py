"""OffsetDelete (KIP-496) through the wire: deletion, the active-group rules, group-level errors, restart."""

from __future__ import annotations

from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.consumer_protocol import encode_subscription

from broker.group.test_groups import FAST, _topic, commit, describe, fetch_offsets, join, sync

UNSET = (-1, "", ErrorCode.NONE)


async def delete_offsets(client, group: str, partitions: list[tuple[str, int]]) -> tuple[int, dict]:
    """(top-level error, {(topic, partition): error}) of an OffsetDelete v0."""
    by_topic: dict[str, list[int]] = {}
    for topic, partition in partitions:
        by_topic.setdefault(topic, []).append(partition)
    body = {
        "group_id": group,
        "topics": [{"name": t, "partitions": [{"partition_index": p} for p in ps]} for t, ps in by_topic.items()],
    }
    response = await client.request(ApiKey.OFFSET_DELETE, 0, body)
    errors = {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}
    return response.error_code, errors


async def _stable_member(client, group: str, subscription: bytes, protocol_type: str = "consumer") -> None:
    """One member joined and synced: the group is Stable."""
    joined = await join(client, group=group, protocols=(("range", subscription),), protocol_type=protocol_type)
    assert joined.error_code == ErrorCode.NONE
    synced = await sync(client, joined.generation_id, joined.member_id, {joined.member_id: b""}, group=group)
    assert synced.error_code == ErrorCode.NONE
    assert (await describe(client, group)).group_state == "Stable"


async def test_deleted_offsets_fetch_as_unset_and_empty_group_goes(start_broker) -> None:
    broker = await start_broker(**FAST)
    client = await broker.connect()
    topic = await _topic(client)
    await commit(client, {(topic, 0): (5, "a"), (topic, 1): (6, "b")}, group="simple")
    error, errors = await delete_offsets(client, "simple", [(topic, 0), (topic, 2), (topic, 99), ("nope", 0)])
    assert error == ErrorCode.NONE
    assert errors == {
        (topic, 0): ErrorCode.NONE,
        (topic, 2): ErrorCode.NONE,  # no offset to delete: still answered NONE, as Kafka does
        (topic, 99): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert await fetch_offsets(client, [(topic, 0), (topic, 1)], group="simple") == {
        (topic, 0): UNSET,
        (topic, 1): (6, "b", ErrorCode.NONE),
    }
    assert broker.node.groups.get("simple") is not None
    # The last offset of an Empty group goes: the group goes with it (Kafka's cleanupGroupMetadata).
    assert await delete_offsets(client, "simple", [(topic, 1)]) == (ErrorCode.NONE, {(topic, 1): ErrorCode.NONE})
    assert broker.node.groups.get("simple") is None
    assert (await describe(client, "simple")).group_state == "Dead"
    assert await fetch_offsets(client, [(topic, 1)], group="simple") == {(topic, 1): UNSET}


async def test_active_consumer_group_keeps_offsets_of_subscribed_topics(start_broker) -> None:
    broker = await start_broker(**FAST)
    client = await broker.connect()
    subscribed, other = await _topic(client, "subscribed"), await _topic(client, "other")
    offsets = {(subscribed, 0): (10, ""), (other, 0): (20, "")}
    await commit(client, offsets, group="active")  # committed while the group is still Empty
    await _stable_member(client, "active", encode_subscription([subscribed]))
    error, errors = await delete_offsets(client, "active", [(subscribed, 0), (other, 0)])
    assert error == ErrorCode.NONE
    assert errors == {(subscribed, 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, (other, 0): ErrorCode.NONE}
    assert await fetch_offsets(client, [(subscribed, 0), (other, 0)], group="active") == {
        (subscribed, 0): (10, "", ErrorCode.NONE),
        (other, 0): UNSET,
    }
    assert (await describe(client, "active")).group_state == "Stable"


async def test_unreadable_subscription_counts_as_subscribed_to_every_topic(start_broker) -> None:
    broker = await start_broker(**FAST)
    client = await broker.connect()
    topic = await _topic(client)
    await commit(client, {(topic, 0): (10, "")}, group="opaque")
    await _stable_member(client, "opaque", b"not a subscription")
    error, errors = await delete_offsets(client, "opaque", [(topic, 0)])
    assert (error, errors) == (ErrorCode.NONE, {(topic, 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC})
    assert await fetch_offsets(client, [(topic, 0)], group="opaque") == {(topic, 0): (10, "", ErrorCode.NONE)}


async def test_group_level_errors_replace_partition_answers(start_broker) -> None:
    broker = await start_broker(**FAST)
    client = await broker.connect()
    topic = await _topic(client)
    assert await delete_offsets(client, "missing", [(topic, 0), ("nope", 0)]) == (ErrorCode.GROUP_ID_NOT_FOUND, {})
    assert await delete_offsets(client, "", [(topic, 0)]) == (ErrorCode.INVALID_GROUP_ID, {})
    # An active group of another protocol type is refused as a whole.
    await commit(client, {(topic, 0): (3, "")}, group="connect")
    await _stable_member(client, "connect", encode_subscription([]), protocol_type="connect")
    assert await delete_offsets(client, "connect", [(topic, 0)]) == (ErrorCode.NON_EMPTY_GROUP, {})
    assert await fetch_offsets(client, [(topic, 0)], group="connect") == {(topic, 0): (3, "", ErrorCode.NONE)}


async def test_deletion_and_subscriptions_survive_restart(start_broker, tmp_path) -> None:
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    topic, other = await _topic(client), await _topic(client, "other")
    await commit(client, {(topic, 0): (11, ""), (topic, 1): (12, "")}, group="simple")
    await commit(client, {(topic, 0): (1, ""), (other, 0): (2, "")}, group="active")
    await _stable_member(client, "active", encode_subscription([topic]))
    assert await delete_offsets(client, "simple", [(topic, 0)]) == (ErrorCode.NONE, {(topic, 0): ErrorCode.NONE})
    await broker.stop()
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    assert await fetch_offsets(client, [(topic, 0), (topic, 1)], group="simple") == {
        (topic, 0): UNSET,
        (topic, 1): (12, "", ErrorCode.NONE),
    }
    # The reloaded Stable group knows its members' subscriptions again.
    error, errors = await delete_offsets(client, "active", [(topic, 0), (other, 0)])
    assert (error, errors) == (ErrorCode.NONE, {(topic, 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC, (other, 0): 0})
    # A group whose last offset was deleted stays gone.
    assert await delete_offsets(client, "simple", [(topic, 1)]) == (ErrorCode.NONE, {(topic, 1): ErrorCode.NONE})
    await broker.stop()
    broker = await start_broker(tmp_path / "d", **FAST)
    client = await broker.connect()
    assert broker.node.groups.get("simple") is None
    assert await fetch_offsets(client, [(other, 0)], group="active") == {(other, 0): UNSET}
