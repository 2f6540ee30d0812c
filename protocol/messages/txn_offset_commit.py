"""TxnOffsetCommit (key 28): versions 0-4 declared, flexible from 3 (v3 adds KIP-447 member fields)."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "TxnOffsetCommitRequest",
    28,
    "0-4",
    "3+",
    (
        F("transactional_id", "string"),
        F("group_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("generation_id", "int32", "3+", default=-1),
        F("member_id", "string", "3+", default=""),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
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
                F("committed_leader_epoch", "int32", "2+", default=-1),
                F("committed_metadata", "string", "0+", nullable="0+"),
            ),
        ),
    ),
)

RESPONSE = Message(
    "TxnOffsetCommitResponse",
    28,
    "0-4",
    "3+",
    (
        F("throttle_time_ms", "int32"),
        F(
            "topics",
            "[]",
            "0+",
            F("name", "string"),
            F("partitions", "[]", "0+", F("partition_index", "int32"), F("error_code", "int16")),
        ),
    ),
)
