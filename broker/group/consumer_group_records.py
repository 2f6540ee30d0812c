"""A KIP-848 group as the records Kafka's group coordinator writes to ``__consumer_offsets``
(``protocol/internal/consumer_group_log.py``), and back.

Guaranteed: ``rebuild_group(group_records(g))`` gives back ``g``'s epochs, members (metadata, epochs, states,
assignments, partitions pending revocation) and targets, less the partitions of topics that no longer exist.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Mapping

from oncelog.broker.group.assignors import TopicPartition
from oncelog.broker.group.consumer_group import ConsumerGroup, ConsumerMember, MemberState, Progress
from oncelog.protocol.internal import consumer_group_log as log_records

#: Kafka's MemberState codes in ConsumerGroupCurrentMemberAssignmentValue.
_STATE_CODES = {MemberState.STABLE: 0, MemberState.UNREVOKED_PARTITIONS: 1, MemberState.UNRELEASED_PARTITIONS: 2}
_STATES = {code: state for state, code in _STATE_CODES.items()}
#: The record kinds written and read back.
_KINDS = (
    log_records.GROUP_METADATA_KEY,
    log_records.MEMBER_METADATA_KEY,
    log_records.TARGET_METADATA_KEY,
    log_records.TARGET_MEMBER_KEY,
    log_records.CURRENT_ASSIGNMENT_KEY,
)
#: Partitions as the records list them: [{"topic_id": ..., "partitions": [...]}] (topics that do not exist left out).
ByTopicId = Callable[[Iterable[TopicPartition]], list[dict]]


def group_records(group: ConsumerGroup, by_topic_id: ByTopicId, only: str | None = None) -> dict[bytes, bytes]:
    """The group as Kafka's records: the group epoch, the assignment epoch, and per member its metadata, target
    and current assignment (only member ``only``'s, when given)."""
    gid = group.group_id
    records = {
        log_records.encode_key(log_records.GROUP_METADATA_KEY, gid): log_records.encode_value(
            log_records.GROUP_METADATA_KEY, {"epoch": group.group_epoch}
        ),
        log_records.encode_key(log_records.TARGET_METADATA_KEY, gid): log_records.encode_value(
            log_records.TARGET_METADATA_KEY, {"assignment_epoch": group.assignment_epoch}
        ),
    }
    members = group.members.values() if only is None else [group.members[only]] if only in group.members else []
    for m in members:
        metadata = {
            "instance_id": m.instance_id,
            "rack_id": m.rack_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed),
            "subscribed_topic_regex": m.regex,
            "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "server_assignor": m.server_assignor,
        }
        target = {"topic_partitions": by_topic_id(group.target.get(m.member_id, ()))}
        p = m.progress
        current = {
            "member_epoch": p.epoch,
            "previous_member_epoch": p.previous_epoch,
            "state": _STATE_CODES[p.state],
            "assigned_partitions": by_topic_id(p.assigned),
            "partitions_pending_revocation": by_topic_id(p.revoking),
        }
        for kind, value in (
            (log_records.MEMBER_METADATA_KEY, metadata),
            (log_records.TARGET_MEMBER_KEY, target),
            (log_records.CURRENT_ASSIGNMENT_KEY, current),
        ):
            records[log_records.encode_key(kind, gid, m.member_id)] = log_records.encode_value(kind, value)
    return records


def rebuild_group(group_id: str, records: Mapping[bytes, bytes], names: Mapping[uuid.UUID, str]) -> ConsumerGroup:
    """The group the records describe (``names``: the existing topics by id). Raises DecodeError for a malformed
    record."""

    def partitions(entries: list) -> frozenset[TopicPartition]:
        return frozenset((names[e.topic_id], p) for e in entries if e.topic_id in names for p in e.partitions)

    group = ConsumerGroup(group_id)
    values: dict[int, dict[str, dict]] = {}
    for key_bytes, value_bytes in records.items():
        key = log_records.decode_consumer_key(key_bytes)
        if key is None or key.kind not in _KINDS:
            continue
        values.setdefault(key.kind, {})[key.member] = log_records.decode_value(key.kind, value_bytes)
    group.group_epoch = values.get(log_records.GROUP_METADATA_KEY, {}).get("", {}).get("epoch", 0)
    meta = values.get(log_records.TARGET_METADATA_KEY, {}).get("", {})
    group.assignment_epoch = meta.get("assignment_epoch", 0)
    for member_id, m in values.get(log_records.MEMBER_METADATA_KEY, {}).items():
        member = ConsumerMember(
            member_id=member_id,
            instance_id=m["instance_id"],
            rack_id=m["rack_id"],
            client_id=m["client_id"],
            client_host=m["client_host"],
            rebalance_timeout_ms=m["rebalance_timeout_ms"],
            subscribed=tuple(m["subscribed_topic_names"]),
            regex=m["subscribed_topic_regex"],
            server_assignor=m["server_assignor"],
        )
        group.add(member)
        target = values.get(log_records.TARGET_MEMBER_KEY, {}).get(member_id)
        if target is not None:
            group.target[member_id] = partitions(target["topic_partitions"])
        current = values.get(log_records.CURRENT_ASSIGNMENT_KEY, {}).get(member_id)
        if current is not None:
            state = _STATES.get(current["state"], MemberState.UNRELEASED_PARTITIONS)
            group.set_progress(
                member,
                Progress(
                    current["member_epoch"],
                    current["previous_member_epoch"],
                    state,
                    partitions(current["assigned_partitions"]),
                    partitions(current["partitions_pending_revocation"]),
                ),
            )
    return group
