"""OffsetCommit (8): store a group's offsets; answered once they are fsynced in ``__consumer_offsets``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.clock import now_ms
from oncelog.broker.request import Request
from oncelog.protocol.internal.group_log import OffsetValue

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: OffsetCommitRequest.DEFAULT_TIMESTAMP / DEFAULT_RETENTION_TIME: "not set".
DEFAULT_TIMESTAMP = -1
DEFAULT_RETENTION_TIME = -1


def offsets_of(topics, now: int, *, retention_ms: int = DEFAULT_RETENTION_TIME) -> dict[tuple[str, int], OffsetValue]:
    """The request's offsets as log values (null metadata is stored as "", as Kafka does)."""
    expire = now + retention_ms if retention_ms != DEFAULT_RETENTION_TIME else -1
    return {
        (topic.name, p.partition_index): OffsetValue(
            offset=p.committed_offset,
            metadata=p.committed_metadata or "",
            commit_timestamp_ms=_commit_timestamp(p, now),
            leader_epoch=p.committed_leader_epoch,
            expire_timestamp_ms=expire,
        )
        for topic in topics
        for p in topic.partitions
    }


def _commit_timestamp(partition, now: int) -> int:
    """OffsetCommit v1 may carry its own commit timestamp; otherwise (and for TxnOffsetCommit) it is now."""
    stamp = partition.get("commit_timestamp", DEFAULT_TIMESTAMP)
    return stamp if stamp != DEFAULT_TIMESTAMP else now


def by_topic(errors: dict[tuple[str, int], int]) -> list[dict]:
    topics: dict[str, list[dict]] = {}
    for (topic, partition), error in errors.items():
        topics.setdefault(topic, []).append({"partition_index": partition, "error_code": error})
    return [{"name": name, "partitions": partitions} for name, partitions in topics.items()]


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    offsets = offsets_of(body.topics, now_ms(), retention_ms=body.retention_time_ms)
    errors = await broker.groups.commit_offsets(
        body.group_id,
        body.generation_id_or_member_epoch,
        body.member_id,
        body.group_instance_id,
        offsets,
        api_version=request.version,
    )
    return {"throttle_time_ms": 0, "topics": by_topic(errors)}
