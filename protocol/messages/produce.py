"""Produce (key 0): versions 0-11 declared, flexible from 9. ``records`` stays raw bytes."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "ProduceRequest",
    0,
    "0-11",
    "9+",
    (
        F("transactional_id", "string", "3+", nullable="3+", default=None),
        F("acks", "int16"),
        F("timeout_ms", "int32"),
        F(
            "topic_data",
            "[]",
            "0+",
            F("name", "string"),
            F("partition_data", "[]", "0+", F("index", "int32"), F("records", "records", "0+", nullable="0+")),
        ),
    ),
)

RESPONSE = Message(
    "ProduceResponse",
    0,
    "0-11",
    "9+",
    (
        F(
            "responses",
            "[]",
            "0+",
            F("name", "string"),
            F(
                "partition_responses",
                "[]",
                "0+",
                F("index", "int32"),
                F("error_code", "int16"),
                F("base_offset", "int64"),
                F("log_append_time_ms", "int64", "2+", default=-1),
                F("log_start_offset", "int64", "5+", default=-1),
                F(
                    "record_errors",
                    "[]",
                    "8+",
                    F("batch_index", "int32", "8+"),
                    F("batch_index_error_message", "string", "8+", nullable="8+", default=None),
                ),
                F("error_message", "string", "8+", nullable="8+", default=None),
                F(
                    "current_leader",
                    "struct",
                    "10+",
                    F("leader_id", "int32", "10+", default=-1),
                    F("leader_epoch", "int32", "10+", default=-1),
                    tag=0,
                    tagged="10+",
                ),
            ),
        ),
        F("throttle_time_ms", "int32", "1+", default=0),
        F(
            "node_endpoints",
            "[]",
            "10+",
            F("node_id", "int32", "10+"),
            F("host", "string", "10+"),
            F("port", "int32", "10+"),
            F("rack", "string", "10+", nullable="10+", default=None),
            tag=0,
            tagged="10+",
        ),
    ),
)
