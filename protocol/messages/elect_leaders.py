"""ElectLeaders (key 43): versions 0-2 declared, flexible from 2; v1 adds the election type (KIP-460) and the
response's top-level error code."""

from oncelog.protocol.schema import F, Message

#: Kafka's ElectionType: elect the preferred replica / any live replica when none is in sync.
ELECTION_TYPE_PREFERRED = 0
ELECTION_TYPE_UNCLEAN = 1
#: ElectLeadersRequest's TimeoutMs default.
DEFAULT_TIMEOUT_MS = 60000

# fmt: off
REQUEST = Message("ElectLeadersRequest", 43, "0-2", "2+", (
    F("election_type", "int8", "1+", default=ELECTION_TYPE_PREFERRED),
    F("topic_partitions", "[]", "0+",
      F("topic", "string"),
      F("partitions", "[]int32"),
      nullable="0+"),
    F("timeout_ms", "int32", "0+", default=DEFAULT_TIMEOUT_MS),
))

RESPONSE = Message("ElectLeadersResponse", 43, "0-2", "2+", (
    F("throttle_time_ms", "int32"),
    F("error_code", "int16", "1+"),
    F("replica_election_results", "[]", "0+",
      F("topic", "string"),
      F("partition_result", "[]", "0+",
        F("partition_id", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", "0+", nullable="0+"))),
))
# fmt: on
