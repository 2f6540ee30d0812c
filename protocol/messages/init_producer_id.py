"""InitProducerId (key 22): versions 0-5 declared, flexible from 2 (v3+ KIP-360 epoch bump)."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "InitProducerIdRequest",
    22,
    "0-5",
    "2+",
    (
        F("transactional_id", "string", "0+", nullable="0+"),
        F("transaction_timeout_ms", "int32"),
        F("producer_id", "int64", "3+", default=-1),
        F("producer_epoch", "int16", "3+", default=-1),
    ),
)

RESPONSE = Message(
    "InitProducerIdResponse",
    22,
    "0-5",
    "2+",
    (
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("producer_id", "int64", "0+", default=-1),
        F("producer_epoch", "int16"),
    ),
)
