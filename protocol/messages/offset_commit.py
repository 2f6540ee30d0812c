"""OffsetCommit (key 8): versions 0-9 declared, flexible from 8.

v1 adds generation/member and a per-partition commit_timestamp (v1 only), v2-4 retention_time_ms, v6 the
committed leader epoch, v7 group_instance_id, v9 (same fields) the member epoch of KIP-848 groups.
"""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "OffsetCommitRequest",
    8,
    "0-9",
    "8+",
    (
        F("group_id", "string"),
        F("generation_id_or_member_epoch", "int32", "1+", default=-1),
        F("member_id", "string", "1+"),
        F("group_instance_id", "string", "7+", nullable="7+", default=None),
        F("retention_time_ms", "int64", "2-4", default=-1),
        F(
            "topics",
            "[]",
            "0+",
            F("name", "string"),
            F(
                "partitions",
                "[]",
                "0+",
                F("partition_index", "int32"),
                F("committed_offset", "int64"),
                F("committed_leader_epoch", "int32", "6+", default=-1),
                F("commit_timestamp", "int64", "1", default=-1),
                F("committed_metadata", "string", "0+", nullable="0+"),
            ),
        ),
    ),
)

RESPONSE = Message(
    "OffsetCommitResponse",
    8,
    "0-9",
    "8+",
    (
        F("throttle_time_ms", "int32", "3+"),
        F(
            "topics",
            "[]",
            "0+",
            F("name", "string"),
            F("partitions", "[]", "0+", F("partition_index", "int32"), F("error_code", "int16")),
        ),
    ),
)
