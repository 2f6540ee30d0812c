"""ListOffsets (key 2): versions 0-10 declared, flexible from 6."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "ListOffsetsRequest",
    2,
    "0-10",
    "6+",
    (
        F("replica_id", "int32"),
        F("isolation_level", "int8", "2+"),
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
                F("current_leader_epoch", "int32", "4+", default=-1),
                F("timestamp", "int64"),
                F("max_num_offsets", "int32", "0", default=1),
            ),
        ),
        F("timeout_ms", "int32", "10+"),
    ),
)

RESPONSE = Message(
    "ListOffsetsResponse",
    2,
    "0-10",
    "6+",
    (
        F("throttle_time_ms", "int32", "2+"),
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
                F("error_code", "int16"),
                F("old_style_offsets", "[]int64", "0"),
                F("timestamp", "int64", "1+", default=-1),
                F("offset", "int64", "1+", default=-1),
                F("leader_epoch", "int32", "4+", default=-1),
            ),
        ),
    ),
)
