"""Classic consumer-group partition assignors (``range``, ``roundrobin``) and the ``consumer`` protocol's
assignment encoding (ConsumerProtocol v0: int16 version, then topics with their partitions, user data bytes); the
subscription encoding is ``oncelog.protocol.consumer_protocol``'s, which the broker reads too.

Guarantees: the same assignment as Kafka's RangeAssignor / RoundRobinAssignor for the same inputs (members ordered
by member id; partitions by topic then number); every partition of a subscribed topic goes to exactly one member.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

from oncelog.client.types import TopicPartition

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def _string(s: str) -> bytes:
    raw = s.encode()
    return _I16.pack(len(raw)) + raw


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def unpack(self, fmt: struct.Struct) -> int:
        (value,) = fmt.unpack_from(self.data, self.pos)
        self.pos += fmt.size
        return value

    def string(self) -> str:
        n = self.unpack(_I16)
        s = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return s


def encode_assignment(partitions: Sequence[TopicPartition]) -> bytes:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    out = [_I16.pack(0), _I32.pack(len(by_topic))]
    for topic, parts in sorted(by_topic.items()):
        out.append(_string(topic))
        out.append(_I32.pack(len(parts)))
        out += [_I32.pack(p) for p in sorted(parts)]
    out.append(_I32.pack(-1))
    return b"".join(out)


def decode_assignment(data: bytes) -> list[TopicPartition]:
    if not data:
        return []
    r = _Reader(data)
    r.unpack(_I16)
    out = []
    for _ in range(r.unpack(_I32)):
        topic = r.string()
        out += [TopicPartition(topic, r.unpack(_I32)) for _ in range(r.unpack(_I32))]
    return out


def range_assign(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    """Per topic, contiguous ranges of partitions to the members subscribed to it (the first ones get one more)."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    for topic in sorted(partitions):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        count = partitions[topic]
        per, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            n = per + (1 if i < extra else 0)
            out[member] += [TopicPartition(topic, p) for p in range(start, start + n)]
            start += n
    return out


def roundrobin_assign(
    subscriptions: Mapping[str, Sequence[str]], partitions: Mapping[str, int]
) -> dict[str, list[TopicPartition]]:
    """All partitions in (topic, partition) order dealt to the members in turn, skipping unsubscribed members."""
    out: dict[str, list[TopicPartition]] = {m: [] for m in subscriptions}
    members = sorted(subscriptions)
    if not members:
        return out
    i = 0
    for topic in sorted(partitions):
        for p in range(partitions[topic]):
            for _ in range(len(members)):
                member = members[i % len(members)]
                i += 1
                if topic in subscriptions[member]:
                    out[member].append(TopicPartition(topic, p))
                    break
    return out


ASSIGNORS = {"range": range_assign, "roundrobin": roundrobin_assign}
