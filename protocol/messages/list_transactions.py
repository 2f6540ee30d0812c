"""ListTransactions (key 66, KIP-664): versions 0-1 declared, flexible in every version (v1: KIP-994 filter)."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "ListTransactionsRequest",
    66,
    "0-1",
    "0+",
    (
        F("state_filters", "[]string"),
        F("producer_id_filters", "[]int64"),
        F("duration_filter", "int64", "1+", default=-1),
    ),
)

RESPONSE = Message(
    "ListTransactionsResponse",
    66,
    "0-1",
    "0+",
    (
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("unknown_state_filters", "[]string"),
        F(
            "transaction_states",
            "[]",
            "0+",
            F("transactional_id", "string"),
            F("producer_id", "int64"),
            F("transaction_state", "string"),
        ),
    ),
)
