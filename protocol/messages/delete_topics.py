"""DeleteTopics (key 20): versions 0-6 declared, flexible from 4."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "DeleteTopicsRequest",
    20,
    "0-6",
    "4+",
    (
        F("topics", "[]", "6+", F("name", "string", "6+", nullable="6+", default=None), F("topic_id", "uuid", "6+")),
        F("topic_names", "[]string", "0-5"),
        F("timeout_ms", "int32"),
    ),
)

RESPONSE = Message(
    "DeleteTopicsResponse",
    20,
    "0-6",
    "4+",
    (
        F("throttle_time_ms", "int32", "1+"),
        F(
            "responses",
            "[]",
            "0+",
            F("name", "string", "0+", nullable="6+"),
            F("topic_id", "uuid", "6+"),
            F("error_code", "int16"),
            F("error_message", "string", "5+", nullable="5+", default=None),
        ),
    ),
)
