"""DescribeProducers (key 61, KIP-664): version 0 declared, flexible in every version."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "DescribeProducersRequest",
    61,
    "0",
    "0+",
    (F("topics", "[]", "0+", F("name", "string"), F("partition_indexes", "[]int32")),),
)

RESPONSE = Message(
    "DescribeProducersResponse",
    61,
    "0",
    "0+",
    (
        F("throttle_time_ms", "int32"),
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
                F("error_message", "string", "0+", nullable="0+", default=None),
                F(
                    "active_producers",
                    "[]",
                    "0+",
                    F("producer_id", "int64"),
                    F("producer_epoch", "int32"),  # int32 on the wire, unlike everywhere else
                    F("last_sequence", "int32", "0+", default=-1),
                    F("last_timestamp", "int64", "0+", default=-1),
                    F("coordinator_epoch", "int32"),
                    F("current_txn_start_offset", "int64", "0+", default=-1),
                ),
            ),
        ),
    ),
)
