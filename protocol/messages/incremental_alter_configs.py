"""IncrementalAlterConfigs (key 44, KIP-339): versions 0-1, flexible from 1. Per config an operation:
SET 0, DELETE 1, APPEND 2, SUBTRACT 3 (Kafka's AlterConfigOp.OpType)."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "IncrementalAlterConfigsRequest",
    44,
    "0-1",
    "1+",
    (
        F(
            "resources",
            "[]",
            "0+",
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F(
                "configs",
                "[]",
                "0+",
                F("name", "string"),
                F("config_operation", "int8"),
                F("value", "string", "0+", nullable="0+"),
            ),
        ),
        F("validate_only", "bool"),
    ),
)

RESPONSE = Message(
    "IncrementalAlterConfigsResponse",
    44,
    "0-1",
    "1+",
    (
        F("throttle_time_ms", "int32"),
        F(
            "responses",
            "[]",
            "0+",
            F("error_code", "int16"),
            F("error_message", "string", "0+", nullable="0+"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
        ),
    ),
)
