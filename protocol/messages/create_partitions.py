"""CreatePartitions (key 37): versions 0-3 declared, flexible from 2 (v1 and v3 change only broker behaviour)."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "CreatePartitionsRequest",
    37,
    "0-3",
    "2+",
    (
        F(
            "topics",
            "[]",
            "0+",
            F("name", "string"),
            F("count", "int32"),
            F("assignments", "[]", "0+", F("broker_ids", "[]int32"), nullable="0+"),
        ),
        F("timeout_ms", "int32"),
        F("validate_only", "bool"),
    ),
)

RESPONSE = Message(
    "CreatePartitionsResponse",
    37,
    "0-3",
    "2+",
    (
        F("throttle_time_ms", "int32"),
        F(
            "results",
            "[]",
            "0+",
            F("name", "string"),
            F("error_code", "int16"),
            F("error_message", "string", "0+", nullable="0+", default=None),
        ),
    ),
)
