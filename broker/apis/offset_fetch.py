"""OffsetFetch (9): a group's committed offsets (v2+: all of them for null topics; v7+: require_stable)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    wanted = None
    if body.topics is not None:
        wanted = [(t.name, p) for t in body.topics for p in t.partition_indexes]
    error, results = broker.groups.fetch_offsets(body.group_id, wanted, body.require_stable)
    topics: dict[str, list[dict]] = {}
    for (topic, partition), offset, leader_epoch, metadata, partition_error in results:
        topics.setdefault(topic, []).append(
            {
                "partition_index": partition,
                "committed_offset": offset,
                "committed_leader_epoch": leader_epoch,
                "metadata": metadata,
                "error_code": partition_error,
            }
        )
    return {
        "throttle_time_ms": 0,
        "topics": [{"name": name, "partitions": partitions} for name, partitions in topics.items()],
        "error_code": error,
    }
