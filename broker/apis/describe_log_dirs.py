"""DescribeLogDirs (35): this broker's one log directory and the partitions it holds, as Kafka's
ReplicaManager.describeLogDirs answers.

- ``log_dir`` is the data directory made absolute, symlinks not resolved (as Java's ``Path.toAbsolutePath``).
- ``topics`` null means every partition log, internal topics included (Kafka's ``logManager.allLogs``); otherwise
  only the named partitions this broker has: unknown topics and partitions are left out, as is a topic left with
  no partition.
- ``partition_size`` is the bytes of the partition's ``.log`` segment files; ``offset_lag`` is 0 (the high
  watermark never passes the log end offset: Kafka's ``max(hw - leo, 0)``); ``is_future_key`` is false (no
  AlterReplicaLogDirs move is ever under way).
- ``total_bytes`` / ``usable_bytes`` (v4) are the volume's size and the bytes an unprivileged process may still
  use (statvfs ``f_blocks`` / ``f_bavail`` times ``f_frsize``, as Java's FileStore). If the directory cannot be
  examined, its result carries UNKNOWN_SERVER_ERROR (Kafka's answer for an unexpected I/O failure). oncelog has no
  notion of an offline log directory, so KAFKA_STORAGE_ERROR, Kafka's answer for one, never occurs.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode
from oncelog.storage.log import PartitionLog

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


def _selected(broker: Broker, topics) -> list[PartitionLog]:
    logs = broker.logs.all_logs()
    if topics is None:
        return list(logs.values())
    wanted = {(t.topic, p) for t in topics for p in t.partitions}
    return [log for key, log in logs.items() if key in wanted]


def _topics(logs: list[PartitionLog]) -> list[dict]:
    by_topic: dict[str, list[PartitionLog]] = defaultdict(list)
    for log in logs:
        by_topic[log.topic].append(log)
    return [
        {
            "name": topic,
            "partitions": [
                {
                    "partition_index": log.partition,
                    "partition_size": log.size_in_bytes,
                    "offset_lag": 0,
                    "is_future_key": False,
                }
                for log in sorted(by_topic[topic], key=lambda log: log.partition)
            ],
        }
        for topic in sorted(by_topic)
    ]


def _result(broker: Broker, topics) -> dict:
    log_dir = str(broker.data_dir.absolute())
    try:
        volume = os.statvfs(log_dir)
    except OSError:
        return {"error_code": ErrorCode.UNKNOWN_SERVER_ERROR, "log_dir": log_dir, "topics": []}
    return {
        "error_code": ErrorCode.NONE,
        "log_dir": log_dir,
        "topics": _topics(_selected(broker, topics)),
        "total_bytes": volume.f_blocks * volume.f_frsize,
        "usable_bytes": volume.f_bavail * volume.f_frsize,
    }


async def handle(broker: Broker, request: Request) -> dict:
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "results": [_result(broker, request.body.topics)]}
