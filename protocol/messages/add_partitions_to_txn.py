"""AddPartitionsToTxn (key 24): versions 0-3 declared, flexible from 3.

Versions 4+ (KIP-890: batched, ``verify_only``) are sent only broker to broker and are deliberately not declared.
"""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "AddPartitionsToTxnRequest",
    24,
    "0-3",
    "3+",
    (
        F("v3_and_below_transactional_id", "string"),
        F("v3_and_below_producer_id", "int64"),
        F("v3_and_below_producer_epoch", "int16"),
        F("v3_and_below_topics", "[]", "0+", F("name", "string"), F("partitions", "[]int32")),
    ),
)

RESPONSE = Message(
    "AddPartitionsToTxnResponse",
    24,
    "0-3",
    "3+",
    (
        F("throttle_time_ms", "int32"),
        F(
            "results_by_topic_v3_and_below",
            "[]",
            "0+",
            F("name", "string"),
            F("results_by_partition", "[]", "0+", F("partition_index", "int32"), F("partition_error_code", "int16")),
        ),
    ),
)
