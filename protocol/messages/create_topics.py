"""CreateTopics (key 19): versions 0-7 declared, flexible from 5."""

from oncelog.protocol.schema import F, Message

# CreateTopics request timeoutMs default (ms), as in Kafka's schema.
DEFAULT_TIMEOUT_MS = 60000

REQUEST = Message(
    "CreateTopicsRequest",
    19,
    "0-7",
    "5+",
    (
        F(
            "topics",
            "[]",
            "0+",
            F("name", "string"),
            F("num_partitions", "int32"),
            F("replication_factor", "int16"),
            F("assignments", "[]", "0+", F("partition_index", "int32"), F("broker_ids", "[]int32")),
            F("configs", "[]", "0+", F("name", "string"), F("value", "string", "0+", nullable="0+")),
        ),
        F("timeout_ms", "int32", "0+", default=DEFAULT_TIMEOUT_MS),
        F("validate_only", "bool", "1+", default=False),
    ),
)

RESPONSE = Message(
    "CreateTopicsResponse",
    19,
    "0-7",
    "5+",
    (
        F("throttle_time_ms", "int32", "2+"),
        F(
            "topics",
            "[]",
            "0+",
            F("name", "string"),
            F("topic_id", "uuid", "7+"),
            F("error_code", "int16"),
            F("error_message", "string", "1+", nullable="0+"),
            F("topic_config_error_code", "int16", "5+", tag=0, tagged="5+"),
            F("num_partitions", "int32", "5+", default=-1),
            F("replication_factor", "int16", "5+", default=-1),
            F(
                "configs",
                "[]",
                "5+",
                F("name", "string", "5+"),
                F("value", "string", "5+", nullable="5+"),
                F("read_only", "bool", "5+"),
                F("config_source", "int8", "5+", default=-1),
                F("is_sensitive", "bool", "5+"),
                nullable="5+",
            ),
        ),
    ),
)
