"""AddPartitionsToTxn (key 24): versions 0-5 declared, flexible from 3; v4+ is batched (KIP-890)."""

from oncelog.protocol.schema import F, Field, Message

_TOPIC: tuple[Field, ...] = (
    F("name", "string"),
    F("partitions", "[]int32"),
)

_TOPIC_RESULT: tuple[Field, ...] = (
    F("name", "string"),
    F("results_by_partition", "[]", "0+",
      F("partition_index", "int32"),
      F("partition_error_code", "int16")),
)

REQUEST = Message("AddPartitionsToTxnRequest", 24, "0-5", "3+", (
    F("transactions", "[]", "4+",
      F("transactional_id", "string", "4+"),
      F("producer_id", "int64", "4+"),
      F("producer_epoch", "int16", "4+"),
      F("verify_only", "bool", "4+", default=False),
      F("topics", "[]", "4+", *_TOPIC)),
    F("v3_and_below_transactional_id", "string", "0-3"),
    F("v3_and_below_producer_id", "int64", "0-3"),
    F("v3_and_below_producer_epoch", "int16", "0-3"),
    F("v3_and_below_topics", "[]", "0-3", *_TOPIC),
))

RESPONSE = Message("AddPartitionsToTxnResponse", 24, "0-5", "3+", (
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "4+"),
    F("results_by_transaction", "[]", "4+",
      F("transactional_id", "string", "4+"),
      F("topic_results", "[]", "4+", *_TOPIC_RESULT)),
    F("results_by_topic_v3_and_below", "[]", "0-3", *_TOPIC_RESULT),
))
