"""Offset expiration (Kafka's GroupMetadata.removeExpiredOffsets): a Stable ``consumer`` group loses the offsets of
topics none of its members subscribe to, an Empty group counts retention from when it became Empty, an offset
committed with its own retention time expires at that time."""

from __future__ import annotations

import trio
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.consumer_protocol import encode_subscription

from broker.group.test_groups import FAST, _topic, commit, describe, fetch_offsets, join, sync
from broker.group.test_offset_delete import _stable_member

UNSET = (-1, "", ErrorCode.NONE)
RETENTION = {"offsets_retention_minutes": "1"}
RETENTION_MS = 60_000


def _committed_at(broker, group: str, tp: tuple[str, int]) -> int:
    return broker.node.groups.get(group).offsets[tp].value.commit_timestamp_ms


async def test_stable_consumer_group_expires_only_offsets_of_unsubscribed_topics(start_broker, tmp_path) -> None:
    broker = await start_broker(tmp_path / "d", **FAST, **RETENTION)
    client = await broker.connect()
    subscribed, other = await _topic(client, "subscribed", 1), await _topic(client, "other", 1)
    offsets = {(subscribed, 0): (10, ""), (other, 0): (20, "")}
    groups = ("active", "opaque", "connect", "joining")
    for group in groups:
        await commit(client, offsets, group=group)
    await _stable_member(client, "active", encode_subscription([subscribed]))
    # Kafka expires nothing in a Stable group whose subscriptions it cannot read, in a Stable group of another
    # protocol type, or in a group that is rebalancing.
    await _stable_member(client, "opaque", b"not a subscription")
    await _stable_member(client, "connect", encode_subscription([subscribed]), protocol_type="connect")
    joined = await join(client, group="joining", protocols=(("range", encode_subscription([subscribed])),))
    assert joined.error_code == ErrorCode.NONE
    assert (await describe(client, "joining")).group_state == "CompletingRebalance"
    coordinator = broker.node.groups
    stamps = [_committed_at(broker, g, tp) for g in groups for tp in offsets]

    await coordinator.expire_offsets(min(stamps) + RETENTION_MS - 1)
    for group in groups:
        assert await fetch_offsets(client, list(offsets), group=group) == {
            (subscribed, 0): (10, "", ErrorCode.NONE),
            (other, 0): (20, "", ErrorCode.NONE),
        }
    await coordinator.expire_offsets(max(stamps) + RETENTION_MS)
    assert await fetch_offsets(client, list(offsets), group="active") == {
        (subscribed, 0): (10, "", ErrorCode.NONE),
        (other, 0): UNSET,
    }
    # A subscribed topic's offset never expires while the group is Stable; nor does the group go.
    await coordinator.expire_offsets(10**15)
    assert await fetch_offsets(client, list(offsets), group="active") == {
        (subscribed, 0): (10, "", ErrorCode.NONE),
        (other, 0): UNSET,
    }
    assert (await describe(client, "active")).group_state == "Stable"
    for group in ("opaque", "connect", "joining"):
        assert await fetch_offsets(client, list(offsets), group=group) == {
            (subscribed, 0): (10, "", ErrorCode.NONE),
            (other, 0): (20, "", ErrorCode.NONE),
        }

    await broker.stop()
    broker = await start_broker(tmp_path / "d", **FAST, **RETENTION)
    client = await broker.connect()
    assert await fetch_offsets(client, list(offsets), group="active") == {
        (subscribed, 0): (10, "", ErrorCode.NONE),
        (other, 0): UNSET,
    }


async def test_empty_group_retention_counts_from_when_it_became_empty(start_broker) -> None:
    broker = await start_broker(**FAST, **RETENTION)
    client = await broker.connect()
    topic = await _topic(client, "t", 1)
    joined = await join(client, group="left", protocols=(("range", encode_subscription([topic])),))
    await sync(client, joined.generation_id, joined.member_id, {joined.member_id: b""}, group="left")
    leave = {"group_id": "left", "members": [{"member_id": joined.member_id}]}
    response = await client.request(ApiKey.LEAVE_GROUP, 3, leave)
    assert response.error_code == ErrorCode.NONE
    assert (await describe(client, "left")).group_state == "Empty"
    empty_since = broker.node.groups.get("left").state_timestamp_ms
    await trio.sleep(0.05)
    await commit(client, {(topic, 0): (4, "")}, group="left")  # a standalone commit to the Empty group
    assert _committed_at(broker, "left", (topic, 0)) > empty_since
    # Kafka's base is the state timestamp, not the later commit: the offset and then the group go.
    await broker.node.groups.expire_offsets(empty_since + RETENTION_MS - 1)
    assert await fetch_offsets(client, [(topic, 0)], group="left") == {(topic, 0): (4, "", ErrorCode.NONE)}
    await broker.node.groups.expire_offsets(empty_since + RETENTION_MS)
    assert await fetch_offsets(client, [(topic, 0)], group="left") == {(topic, 0): UNSET}
    assert (await describe(client, "left")).group_state == "Dead"


async def test_offset_committed_with_a_retention_time_expires_at_its_expire_timestamp(start_broker) -> None:
    broker = await start_broker(**FAST)  # offsets.retention.minutes: Kafka's default, 7 days
    client = await broker.connect()
    topic = await _topic(client, "t", 1)
    body = {
        "group_id": "v2",
        "generation_id_or_member_epoch": -1,
        "member_id": "",
        "retention_time_ms": 1000,
        "topics": [{"name": topic, "partitions": [{"partition_index": 0, "committed_offset": 3}]}],
    }
    response = await client.request(ApiKey.OFFSET_COMMIT, 2, body)
    assert response.topics[0].partitions[0].error_code == ErrorCode.NONE
    committed_at = _committed_at(broker, "v2", (topic, 0))
    await broker.node.groups.expire_offsets(committed_at + 999)
    assert await fetch_offsets(client, [(topic, 0)], group="v2") == {(topic, 0): (3, "", ErrorCode.NONE)}
    await broker.node.groups.expire_offsets(committed_at + 1000)
    assert await fetch_offsets(client, [(topic, 0)], group="v2") == {(topic, 0): UNSET}
    assert broker.node.groups.get("v2") is None
