"""DeleteRecords (key 21): versions 0-2 declared, flexible from 2 (v1 changes only throttling behaviour)."""

from oncelog.protocol.schema import F, Message

#: The offset that stands for the partition's high watermark (Kafka's DeleteRecordsRequest.HIGH_WATERMARK).
HIGH_WATERMARK = -1
#: The low watermark of a partition answered with an error (Kafka's DeleteRecordsResponse.INVALID_LOW_WATERMARK).
INVALID_LOW_WATERMARK = -1

# Laid out like Kafka's JSON specs, as in the other message modules.
# fmt: off
REQUEST = Message("DeleteRecordsRequest", 21, "0-2", "2+", (
    F("topics", "[]", "0+",
      F("name", "string"),
      F("partitions", "[]", "0+",
        F("partition_index", "int32"),
        F("offset", "int64"))),
    F("timeout_ms", "int32"),
))

RESPONSE = Message("DeleteRecordsResponse", 21, "0-2", "2+", (
    F("throttle_time_ms", "int32"),
    F("topics", "[]", "0+",
      F("name", "string"),
      F("partitions", "[]", "0+",
        F("partition_index", "int32"),
        F("low_watermark", "int64"),
        F("error_code", "int16"))),
))
# fmt: on
