"""Records of the ``__consumer_offsets`` topic: keys and values, byte-compatible with Kafka's group coordinator.

Keys and values are "version-prefixed": an int16 version, then the struct of that version. The key's version
says what the record is:

* versions 0 and 1 -- OffsetCommitKey: ``group`` string, ``topic`` string, ``partition`` int32 (Kafka writes 1);
  value OffsetCommitValue (v0-3 classic, v4 flexible; Kafka writes 3, or 1 when an expire timestamp is set):
  offset int64, leader_epoch int32 (v3+), metadata string, commit_timestamp int64, expire_timestamp int64 (v1 only).
* version 2 -- GroupMetadataKey: ``group`` string; value GroupMetadataValue (v0-3 classic, v4 flexible; Kafka
  writes 3): protocol_type, generation, protocol (nullable), leader (nullable), current_state_timestamp (v2+), and
  the members (member_id, group_instance_id (v3+), client_id, client_host, rebalance_timeout (v1+),
  session_timeout, subscription, assignment).

A null value is a tombstone: the offset was deleted/expired, or the group was deleted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from oncelog.protocol.errors import DecodeError, EncodeError
from oncelog.protocol.internal.versioned import build, parse, split_version
from oncelog.protocol.schema import F, Message

CONSUMER_OFFSETS_TOPIC = "__consumer_offsets"

OFFSET_KEY_VERSIONS = (0, 1)
OFFSET_KEY_VERSION = 1  # what Kafka writes
GROUP_KEY_VERSION = 2
OFFSET_VALUE_VERSIONS = (0, 1, 2, 3, 4)
OFFSET_VALUE_VERSION = 3  # Kafka's highest non-flexible version, written without an expire timestamp
OFFSET_VALUE_VERSION_WITH_EXPIRE = 1  # the only version holding expire_timestamp
GROUP_VALUE_VERSIONS = (0, 1, 2, 3, 4)
GROUP_VALUE_VERSION = 3  # Kafka's highest non-flexible version


_OFFSET_KEY = Message(
    "OffsetCommitKey",
    -1,
    "0-1",
    "none",
    (
        F("group", "string"),
        F("topic", "string"),
        F("partition", "int32"),
    ),
)

_GROUP_KEY = Message("GroupMetadataKey", -1, "2", "none", (F("group", "string"),))

_OFFSET_VALUE = Message(
    "OffsetCommitValue",
    -1,
    "0-4",
    "4+",
    (
        F("offset", "int64"),
        F("leader_epoch", "int32", "3+", default=-1),
        F("metadata", "string"),
        F("commit_timestamp", "int64"),
        F("expire_timestamp", "int64", "1", default=-1),
    ),
)

_GROUP_VALUE = Message(
    "GroupMetadataValue",
    -1,
    "0-4",
    "4+",
    (
        F("protocol_type", "string"),
        F("generation", "int32"),
        F("protocol", "string", nullable="0+"),
        F("leader", "string", nullable="0+"),
        F("current_state_timestamp", "int64", "2+", default=-1),
        F(
            "members",
            "[]",
            "0+",
            F("member_id", "string"),
            F("group_instance_id", "string", "3+", nullable="3+", default=None),
            F("client_id", "string"),
            F("client_host", "string"),
            F("rebalance_timeout", "int32", "1+", default=-1),
            F("session_timeout", "int32"),
            F("subscription", "bytes"),
            F("assignment", "bytes"),
        ),
    ),
)


@dataclass(frozen=True)
class OffsetKey:
    """The key of a committed offset."""

    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class GroupKey:
    """The key of a group's metadata."""

    group: str


@dataclass(frozen=True)
class OffsetValue:
    """One committed offset. ``expire_timestamp_ms`` is -1 unless set (only value v1 can hold it)."""

    offset: int
    metadata: str = ""
    commit_timestamp_ms: int = -1
    leader_epoch: int = -1
    expire_timestamp_ms: int = -1


@dataclass(frozen=True)
class MemberValue:
    """One member of a persisted group."""

    member_id: str
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass(frozen=True)
class GroupValue:
    """A group after a rebalance: its generation, chosen protocol, leader and members."""

    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp_ms: int = -1
    members: tuple[MemberValue, ...] = field(default_factory=tuple)


def encode_offset_key(group: str, topic: str, partition: int, *, version: int = OFFSET_KEY_VERSION) -> bytes:
    """An OffsetCommitKey (version 0 or 1)."""
    if version not in OFFSET_KEY_VERSIONS:
        raise EncodeError(f"unknown offset commit key version {version}")
    body = {"group": group, "topic": topic, "partition": partition}
    return build(_OFFSET_KEY, version, body)


def encode_group_key(group: str) -> bytes:
    """A GroupMetadataKey (version 2)."""
    return build(_GROUP_KEY, GROUP_KEY_VERSION, {"group": group})


def decode_key(data: bytes | bytearray | memoryview) -> OffsetKey | GroupKey:
    """Decode a ``__consumer_offsets`` key. Raises DecodeError for another version (e.g. KIP-848's records),
    truncation, invalid UTF-8 or trailing bytes."""
    version, body = split_version(data, "__consumer_offsets key")
    if version in OFFSET_KEY_VERSIONS:
        k = parse(_OFFSET_KEY, version, body)
        return OffsetKey(k.group, k.topic, k.partition)
    if version == GROUP_KEY_VERSION:
        return GroupKey(parse(_GROUP_KEY, version, body).group)
    raise DecodeError(f"unsupported __consumer_offsets key version {version}")


def encode_offset_value(value: OffsetValue, *, version: int | None = None) -> bytes:
    """An OffsetCommitValue: version 3 by default, 1 when an expire timestamp is set (as Kafka chooses)."""
    if version is None:
        version = OFFSET_VALUE_VERSION_WITH_EXPIRE if value.expire_timestamp_ms >= 0 else OFFSET_VALUE_VERSION
    if version not in OFFSET_VALUE_VERSIONS:
        raise EncodeError(f"unknown offset commit value version {version}")
    body = {
        "offset": value.offset,
        "leader_epoch": value.leader_epoch,
        "metadata": value.metadata,
        "commit_timestamp": value.commit_timestamp_ms,
        "expire_timestamp": value.expire_timestamp_ms,
    }
    return build(_OFFSET_VALUE, version, body)


def decode_offset_value(data: bytes | bytearray | memoryview | None) -> OffsetValue | None:
    """An OffsetCommitValue of any version 0-4; None for a tombstone. Raises DecodeError when malformed."""
    if data is None:
        return None
    version, body = split_version(data, "__consumer_offsets offset value")
    if version not in OFFSET_VALUE_VERSIONS:
        raise DecodeError(f"unknown offset commit value version {version}")
    v = parse(_OFFSET_VALUE, version, body)
    return OffsetValue(v.offset, v.metadata, v.commit_timestamp, v.leader_epoch, v.expire_timestamp)


def encode_group_value(value: GroupValue, *, version: int = GROUP_VALUE_VERSION) -> bytes:
    """A GroupMetadataValue (version 3 by default)."""
    if version not in GROUP_VALUE_VERSIONS:
        raise EncodeError(f"unknown group metadata value version {version}")
    body = {
        "protocol_type": value.protocol_type,
        "generation": value.generation,
        "protocol": value.protocol,
        "leader": value.leader,
        "current_state_timestamp": value.current_state_timestamp_ms,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": m.group_instance_id,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "rebalance_timeout": m.rebalance_timeout_ms,
                "session_timeout": m.session_timeout_ms,
                "subscription": m.subscription,
                "assignment": m.assignment,
            }
            for m in value.members
        ],
    }
    return build(_GROUP_VALUE, version, body)


def decode_group_value(data: bytes | bytearray | memoryview | None) -> GroupValue | None:
    """A GroupMetadataValue of any version 0-4; None for a tombstone. Raises DecodeError when malformed.

    Versions without a rebalance timeout (v0) report the session timeout in its place, as Kafka does.
    """
    if data is None:
        return None
    version, body = split_version(data, "__consumer_offsets group value")
    if version not in GROUP_VALUE_VERSIONS:
        raise DecodeError(f"unknown group metadata value version {version}")
    v = parse(_GROUP_VALUE, version, body)
    members = tuple(
        MemberValue(
            member_id=m.member_id,
            client_id=m.client_id,
            client_host=m.client_host,
            session_timeout_ms=m.session_timeout,
            rebalance_timeout_ms=m.rebalance_timeout if version >= 1 else m.session_timeout,
            subscription=bytes(m.subscription),
            assignment=bytes(m.assignment),
            group_instance_id=m.group_instance_id,
        )
        for m in v.members
    )
    return GroupValue(v.protocol_type, v.generation, v.protocol, v.leader, v.current_state_timestamp, members)
