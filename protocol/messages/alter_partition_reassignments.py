"""AlterPartitionReassignments (key 45, KIP-455): version 0 declared, flexible from 0.

v1 (KIP-860's ``allow_replication_factor_change``, Kafka 4.1) is not declared.
"""

from oncelog.protocol.schema import F, Message

# fmt: off
REQUEST = Message("AlterPartitionReassignmentsRequest", 45, "0", "0+", (
    F("timeout_ms", "int32", "0+", default=60000),
    F("topics", "[]", "0+",
      F("name", "string"),
      F("partitions", "[]", "0+",
        F("partition_index", "int32"),
        F("replicas", "[]int32", "0+", nullable="0+", default=None))),
))

RESPONSE = Message("AlterPartitionReassignmentsResponse", 45, "0", "0+", (
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", "0+", nullable="0+"),
    F("responses", "[]", "0+",
      F("name", "string"),
      F("partitions", "[]", "0+",
        F("partition_index", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", "0+", nullable="0+"))),
))
# fmt: on
