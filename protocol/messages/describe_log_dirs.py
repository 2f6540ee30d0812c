"""DescribeLogDirs (key 35): versions 1-4 declared, flexible from 2 -- Kafka 4.0's range (KIP-896 removed v0).

v3 adds the top-level error code, v4 each directory's volume size and usable bytes (KIP-827). v5 (KIP-1066's
``is_cordoned``, a later 4.x release) is not declared.
"""

from oncelog.protocol.schema import F, Message

# fmt: off
REQUEST = Message("DescribeLogDirsRequest", 35, "1-4", "2+", (
    F("topics", "[]", "0+",
      F("topic", "string"),
      F("partitions", "[]int32"),
      nullable="0+"),
))

RESPONSE = Message("DescribeLogDirsResponse", 35, "1-4", "2+", (
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "3+"),
    F("results", "[]", "0+",
      F("error_code", "int16"),
      F("log_dir", "string"),
      F("topics", "[]", "0+",
        F("name", "string"),
        F("partitions", "[]", "0+",
          F("partition_index", "int32"),
          F("partition_size", "int64"),
          F("offset_lag", "int64"),
          F("is_future_key", "bool"))),
      F("total_bytes", "int64", "4+", default=-1),
      F("usable_bytes", "int64", "4+", default=-1)),
))
# fmt: on
