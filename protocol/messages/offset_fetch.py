"""OffsetFetch (key 9): versions 0-7 declared, flexible from 6.

v2 allows null topics (every committed partition) and adds a top-level error code, v5 the committed leader epoch,
v7 require_stable (KIP-447). (v8+ batch several groups; not declared.)
"""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "OffsetFetchRequest",
    9,
    "0-7",
    "6+",
    (
        F("group_id", "string"),
        F("topics", "[]", "0+", F("name", "string"), F("partition_indexes", "[]int32"), nullable="2+"),
        F("require_stable", "bool", "7+"),
    ),
)

RESPONSE = Message(
    "OffsetFetchResponse",
    9,
    "0-7",
    "6+",
    (
        F("throttle_time_ms", "int32", "3+"),
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
                F("committed_leader_epoch", "int32", "5+", default=-1),
                F("metadata", "string", "0+", nullable="0+"),
                F("error_code", "int16"),
            ),
        ),
        F("error_code", "int16", "2+"),
    ),
)
