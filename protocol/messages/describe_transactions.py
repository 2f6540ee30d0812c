"""DescribeTransactions (key 65, KIP-664): version 0 declared, flexible in every version."""

from oncelog.protocol.schema import F, Message

REQUEST = Message("DescribeTransactionsRequest", 65, "0", "0+", (F("transactional_ids", "[]string"),))

RESPONSE = Message(
    "DescribeTransactionsResponse",
    65,
    "0",
    "0+",
    (
        F("throttle_time_ms", "int32"),
        F(
            "transaction_states",
            "[]",
            "0+",
            F("error_code", "int16"),
            F("transactional_id", "string"),
            F("transaction_state", "string"),  # the state's name, e.g. "Ongoing"
            F("transaction_timeout_ms", "int32"),
            F("transaction_start_time_ms", "int64"),
            F("producer_id", "int64"),
            F("producer_epoch", "int16"),
            F("topics", "[]", "0+", F("topic", "string"), F("partitions", "[]int32")),
        ),
    ),
)
