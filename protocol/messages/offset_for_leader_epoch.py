"""OffsetForLeaderEpoch (key 23, KIP-101, KIP-320): versions 0-4 declared, flexible from 4.

Kafka 4.0 removed versions 0-1 (KIP-896); they are declared here for decoding only. Field names follow Kafka's
JSON specs (OffsetForLeaderEpochRequest.json / OffsetForLeaderEpochResponse.json).
"""

from oncelog.protocol.schema import F, Message

#: The replica id of a request without one (v0-2): Kafka's "debug" consumer (ReplicaId's default).
DEBUGGING_REPLICA_ID = -2
#: The replica id consumers send (v3+).
CONSUMER_REPLICA_ID = -1

# Laid out like Kafka's JSON specs, as in the other message modules.
# fmt: off
REQUEST = Message("OffsetForLeaderEpochRequest", 23, "0-4", "4+", (
    F("replica_id", "int32", "3+", default=DEBUGGING_REPLICA_ID),
    F("topics", "[]", "0+",
      F("topic", "string"),
      F("partitions", "[]", "0+",
        F("partition", "int32"),
        F("current_leader_epoch", "int32", "2+", default=-1),
        F("leader_epoch", "int32"))),
))

RESPONSE = Message("OffsetForLeaderEpochResponse", 23, "0-4", "4+", (
    F("throttle_time_ms", "int32", "2+"),
    F("topics", "[]", "0+",
      F("topic", "string"),
      F("partitions", "[]", "0+",
        F("error_code", "int16"),
        F("partition", "int32"),
        F("leader_epoch", "int32", "1+", default=-1),
        F("end_offset", "int64", "0+", default=-1))),
))
# fmt: on
