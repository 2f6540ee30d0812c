"""OffsetDelete (key 47, KIP-496): version 0 declared, not flexible -- the only version Kafka's releases define since
2.4 (the flexible v1 on Kafka's trunk, for KIP-1313's request header v3, is not declared)."""

from oncelog.protocol.schema import F, Message

# fmt: off
REQUEST = Message("OffsetDeleteRequest", 47, "0", "none", (
    F("group_id", "string"),
    F("topics", "[]", "0+",
      F("name", "string"),
      F("partitions", "[]", "0+",
        F("partition_index", "int32"))),
))

RESPONSE = Message("OffsetDeleteResponse", 47, "0", "none", (
    F("error_code", "int16"),
    F("throttle_time_ms", "int32"),
    F("topics", "[]", "0+",
      F("name", "string"),
      F("partitions", "[]", "0+",
        F("partition_index", "int32"),
        F("error_code", "int16"))),
))
# fmt: on
