"""The ``consumer`` protocol type's member subscription (Kafka's ConsumerProtocolSubscription), as carried in
JoinGroup metadata and in the group records of ``__consumer_offsets``.

An int16 version, then the fields of that version. Every version starts with version 0's fields (topics, user
data) and later ones only append (owned partitions v1, generation v2, rack v3), so reading the version 0 prefix of
any version gives the topics, as Kafka's group coordinator reads them (GroupMetadata.computeSubscribedTopics).
"""

from __future__ import annotations

from collections.abc import Sequence

from oncelog.protocol.errors import DecodeError
from oncelog.protocol.internal.versioned import build, parse, split_version
from oncelog.protocol.schema import F, Message

#: Kafka's ConsumerProtocol.PROTOCOL_TYPE: the protocol type of groups whose members' metadata is a subscription.
PROTOCOL_TYPE = "consumer"

_SUBSCRIPTION = Message(
    "ConsumerProtocolSubscription",
    -1,
    "0",
    "none",
    (
        F("topics", "[]string"),
        F("user_data", "bytes", nullable="0+", default=None),
    ),
)


def encode_subscription(topics: Sequence[str], user_data: bytes | None = None) -> bytes:
    """A version 0 subscription."""
    return build(_SUBSCRIPTION, 0, {"topics": list(topics), "user_data": user_data})


def decode_subscription(data: bytes | bytearray | memoryview) -> list[str]:
    """The subscribed topics of a subscription of any version. Raises DecodeError when the version 0 prefix is
    malformed or the version is negative."""
    version, body = split_version(data, "consumer protocol subscription")
    if version < 0:
        raise DecodeError(f"unsupported consumer protocol subscription version {version}")
    return list(parse(_SUBSCRIPTION, 0, body, allow_trailing=True).topics)
