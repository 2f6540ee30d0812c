"""AlterConfigs (key 33): versions 0-2, flexible from 2. Replaces a resource's whole set of overrides."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "AlterConfigsRequest",
    33,
    "0-2",
    "2+",
    (
        F(
            "resources",
            "[]",
            "0+",
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configs", "[]", "0+", F("name", "string"), F("value", "string", "0+", nullable="0+")),
        ),
        F("validate_only", "bool"),
    ),
)

RESPONSE = Message(
    "AlterConfigsResponse",
    33,
    "0-2",
    "2+",
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
