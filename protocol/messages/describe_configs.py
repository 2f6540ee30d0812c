"""DescribeConfigs (key 32): versions 0-4 declared, flexible from 4."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "DescribeConfigsRequest",
    32,
    "0-4",
    "4+",
    (
        F(
            "resources",
            "[]",
            "0+",
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F("configuration_keys", "[]string", "0+", nullable="0+"),
        ),
        F("include_synonyms", "bool", "1+", default=False),
        F("include_documentation", "bool", "3+", default=False),
    ),
)

RESPONSE = Message(
    "DescribeConfigsResponse",
    32,
    "0-4",
    "4+",
    (
        F("throttle_time_ms", "int32"),
        F(
            "results",
            "[]",
            "0+",
            F("error_code", "int16"),
            F("error_message", "string", "0+", nullable="0+"),
            F("resource_type", "int8"),
            F("resource_name", "string"),
            F(
                "configs",
                "[]",
                "0+",
                F("name", "string"),
                F("value", "string", "0+", nullable="0+"),
                F("read_only", "bool"),
                F("is_default", "bool", "0"),
                F("config_source", "int8", "1+", default=-1),
                F("is_sensitive", "bool"),
                F(
                    "synonyms",
                    "[]",
                    "1+",
                    F("name", "string", "1+"),
                    F("value", "string", "1+", nullable="0+"),
                    F("source", "int8", "1+"),
                ),
                F("config_type", "int8", "3+", default=0),
                F("documentation", "string", "3+", nullable="0+"),
            ),
        ),
    ),
)
