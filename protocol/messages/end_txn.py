"""EndTxn (key 26): versions 0-5 declared, flexible from 3."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "EndTxnRequest",
    26,
    "0-5",
    "3+",
    (
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("producer_epoch", "int16"),
        F("committed", "bool"),
    ),
)

RESPONSE = Message(
    "EndTxnResponse",
    26,
    "0-5",
    "3+",
    (
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("producer_id", "int64", "5+", default=-1),
        F("producer_epoch", "int16", "5+", default=-1),
    ),
)
