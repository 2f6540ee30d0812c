"""AddOffsetsToTxn (key 25): versions 0-4 declared, flexible from 3."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "AddOffsetsToTxnRequest",
    25,
    "0-4",
    "3+",
    (
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("group_id", "string"),
    ),
)

RESPONSE = Message(
    "AddOffsetsToTxnResponse",
    25,
    "0-4",
    "3+",
    (
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
    ),
)
