"""WriteTxnMarkers (key 27): versions 0-1 declared, flexible from 1 (broker to broker)."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "WriteTxnMarkersRequest",
    27,
    "0-1",
    "1+",
    (
        F(
            "markers",
            "[]",
            "0+",
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("transaction_result", "bool"),
            F("topics", "[]", "0+", F("name", "string"), F("partition_indexes", "[]int32")),
            F("coordinator_epoch", "int32"),
        ),
    ),
)

RESPONSE = Message(
    "WriteTxnMarkersResponse",
    27,
    "0-1",
    "1+",
    (
        F(
            "markers",
            "[]",
            "0+",
            F("producer_id", "int64"),
            F(
                "topics",
                "[]",
                "0+",
                F("name", "string"),
                F("partitions", "[]", "0+", F("partition_index", "int32"), F("error_code", "int16")),
            ),
        ),
    ),
)
