"""Request bodies used by several broker tests."""

from __future__ import annotations

from oncelog.protocol.records import SimpleRecord, encode_batch


def batch(values: list[bytes], **kwargs: object) -> bytes:
    return encode_batch([SimpleRecord(b"k%d" % i, v, [("h", b"x")]) for i, v in enumerate(values)], **kwargs)


def produce_body(topic: str, partition: int, records: bytes | None, *, acks: int = -1) -> dict:
    return {
        "transactional_id": None,
        "acks": acks,
        "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }


def fetch_body(
    topic: str,
    partition: int,
    offset: int,
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 50 * 1024 * 1024,
    partition_max_bytes: int = 1024 * 1024,
    isolation_level: int = 0,
) -> dict:
    return {
        "replica_id": -1,
        "max_wait_ms": max_wait_ms,
        "min_bytes": min_bytes,
        "max_bytes": max_bytes,
        "isolation_level": isolation_level,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [
            {
                "topic": topic,
                "partitions": [
                    {
                        "partition": partition,
                        "fetch_offset": offset,
                        "log_start_offset": -1,
                        "partition_max_bytes": partition_max_bytes,
                    }
                ],
            }
        ],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


def create_topic_body(name: str, partitions: int = 1, replication: int = 1, configs: dict | None = None) -> dict:
    return {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": replication,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
        "timeout_ms": 10000,
        "validate_only": False,
    }


def list_offsets_body(topic: str, partition: int, timestamp: int, isolation_level: int = 0) -> dict:
    return {
        "replica_id": -1,
        "isolation_level": isolation_level,
        "topics": [
            {
                "name": topic,
                "partitions": [{"partition_index": partition, "timestamp": timestamp, "current_leader_epoch": -1}],
            }
        ],
    }
