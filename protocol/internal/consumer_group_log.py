"""KIP-848 consumer group records of ``__consumer_offsets``, byte-compatible with Kafka's group coordinator.

Keys are version-prefixed like the classic ones (``group_log.py``), the version saying what the record is; values
are version 0, flexible:

* key 3 -- ConsumerGroupMetadataKey (group): value ConsumerGroupMetadataValue (epoch).
* key 5 -- ConsumerGroupMemberMetadataKey (group, member): value ConsumerGroupMemberMetadataValue (instance id,
  rack id, client id, client host, subscribed topic names, regex, rebalance timeout, server assignor).
* key 6 -- ConsumerGroupTargetAssignmentMetadataKey (group): value (assignment epoch).
* key 7 -- ConsumerGroupTargetAssignmentMemberKey (group, member): value (the member's target partitions).
* key 8 -- ConsumerGroupCurrentMemberAssignmentKey (group, member): value (member epoch, previous epoch, state,
  assigned partitions, partitions pending revocation).

Partitions are listed by topic id. A null value is a tombstone.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from oncelog.protocol.errors import DecodeError
from oncelog.protocol.internal.versioned import build, parse, split_version
from oncelog.protocol.schema import F, Field, Message

GROUP_METADATA_KEY = 3
MEMBER_METADATA_KEY = 5
TARGET_METADATA_KEY = 6
TARGET_MEMBER_KEY = 7
CURRENT_ASSIGNMENT_KEY = 8
#: The key versions of KIP-848 consumer group records (4 is the partition metadata record, not written here).
CONSUMER_GROUP_KEY_VERSIONS = (3, 4, 5, 6, 7, 8)
_MEMBER_KEYS = (MEMBER_METADATA_KEY, TARGET_MEMBER_KEY, CURRENT_ASSIGNMENT_KEY)
VALUE_VERSION = 0


def _topic_partitions(name: str) -> Field:
    return F(name, "[]", "0+", F("topic_id", "uuid"), F("partitions", "[]int32"))


_VALUES = {
    GROUP_METADATA_KEY: Message("ConsumerGroupMetadataValue", -1, "0", "0+", (F("epoch", "int32"),)),
    MEMBER_METADATA_KEY: Message(
        "ConsumerGroupMemberMetadataValue",
        -1,
        "0",
        "0+",
        (
            F("instance_id", "string", nullable="0+", default=None),
            F("rack_id", "string", nullable="0+", default=None),
            F("client_id", "string"),
            F("client_host", "string"),
            F("subscribed_topic_names", "[]string"),
            F("subscribed_topic_regex", "string", nullable="0+", default=None),
            F("rebalance_timeout_ms", "int32", default=-1),
            F("server_assignor", "string", nullable="0+", default=None),
        ),
    ),
    TARGET_METADATA_KEY: Message(
        "ConsumerGroupTargetAssignmentMetadataValue", -1, "0", "0+", (F("assignment_epoch", "int32"),)
    ),
    TARGET_MEMBER_KEY: Message(
        "ConsumerGroupTargetAssignmentMemberValue", -1, "0", "0+", (_topic_partitions("topic_partitions"),)
    ),
    CURRENT_ASSIGNMENT_KEY: Message(
        "ConsumerGroupCurrentMemberAssignmentValue",
        -1,
        "0",
        "0+",
        (
            F("member_epoch", "int32"),
            F("previous_member_epoch", "int32"),
            F("state", "int8"),
            _topic_partitions("assigned_partitions"),
            _topic_partitions("partitions_pending_revocation"),
        ),
    ),
}

Partitions = dict[uuid.UUID, list[int]]


@dataclass(frozen=True)
class ConsumerGroupKey:
    """The key of a KIP-848 record: its kind (key version), group and member ("" for group-wide records)."""

    kind: int
    group: str
    member: str = ""


def encode_key(kind: int, group: str, member: str = "") -> bytes:
    body = {"group": group, "member": member} if kind in _MEMBER_KEYS else {"group": group}
    return build(_key_message(kind), kind, body)


def decode_consumer_key(data: bytes | bytearray | memoryview) -> ConsumerGroupKey | None:
    """The KIP-848 key, or None when ``data`` is another kind of ``__consumer_offsets`` key. Raises DecodeError for
    a malformed one."""
    version, body = split_version(data, "__consumer_offsets key")
    if version not in CONSUMER_GROUP_KEY_VERSIONS:
        return None
    k = parse(_key_message(version), version, body)
    return ConsumerGroupKey(version, k.group, k.get("member") or "")


def encode_value(kind: int, body: dict) -> bytes:
    return build(_VALUES[kind], VALUE_VERSION, body)


def decode_value(kind: int, data: bytes | bytearray | memoryview) -> dict:
    """A value of the record kind ``kind`` (its later versions' extra fields are ignored)."""
    version, body = split_version(data, "consumer group value")
    if kind not in _VALUES:
        raise DecodeError(f"no value for consumer group key version {kind}")
    if version < VALUE_VERSION:
        raise DecodeError(f"unsupported consumer group value version {version}")
    return dict(parse(_VALUES[kind], VALUE_VERSION, body, allow_trailing=True))


_KEY_MESSAGES: dict[int, Message] = {}


def _key_message(kind: int) -> Message:
    message = _KEY_MESSAGES.get(kind)
    if message is None:
        fields = [F("group", "string", str(kind))]
        if kind in _MEMBER_KEYS:
            fields.append(F("member", "string", str(kind)))
        message = Message(f"ConsumerGroupKey{kind}", -1, str(kind), "none", tuple(fields))
        _KEY_MESSAGES[kind] = message
    return message
