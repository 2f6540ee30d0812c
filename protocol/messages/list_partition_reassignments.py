"""ListPartitionReassignments (key 46, KIP-455): version 0 declared, flexible from 0 -- the only version Kafka has."""

from oncelog.protocol.schema import F, Message

# fmt: off
REQUEST = Message("ListPartitionReassignmentsRequest", 46, "0", "0+", (
    F("timeout_ms", "int32", "0+", default=60000),
    F("topics", "[]", "0+",
      F("name", "string"),
      F("partition_indexes", "[]int32"),
      nullable="0+", default=None),
))

RESPONSE = Message("ListPartitionReassignmentsResponse", 46, "0", "0+", (
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", "0+", nullable="0+"),
    F("topics", "[]", "0+",
      F("name", "string"),
      F("partitions", "[]", "0+",
        F("partition_index", "int32"),
        F("replicas", "[]int32"),
        F("adding_replicas", "[]int32"),
        F("removing_replicas", "[]int32"))),
))
# fmt: on
