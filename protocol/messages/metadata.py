"""Metadata (key 3): versions 0-12 declared, flexible from 9."""

from oncelog.protocol.schema import F, Message

# TopicAuthorizedOperations / ClusterAuthorizedOperations default: INT32_MIN means "not requested".
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)

REQUEST = Message(
    "MetadataRequest",
    3,
    "0-12",
    "9+",
    (
        F("topics", "[]", "0+", F("topic_id", "uuid", "10+"), F("name", "string", "0+", nullable="10+"), nullable="1+"),
        F("allow_auto_topic_creation", "bool", "4+", default=True),
        F("include_cluster_authorized_operations", "bool", "8-10"),
        F("include_topic_authorized_operations", "bool", "8+"),
    ),
)

RESPONSE = Message(
    "MetadataResponse",
    3,
    "0-12",
    "9+",
    (
        F("throttle_time_ms", "int32", "3+"),
        F(
            "brokers",
            "[]",
            "0+",
            F("node_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", "1+", nullable="1+", default=None),
        ),
        F("cluster_id", "string", "2+", nullable="2+", default=None),
        F("controller_id", "int32", "1+", default=-1),
        F(
            "topics",
            "[]",
            "0+",
            F("error_code", "int16"),
            F("name", "string", "0+", nullable="12+"),
            F("topic_id", "uuid", "10+"),
            F("is_internal", "bool", "1+", default=False),
            F(
                "partitions",
                "[]",
                "0+",
                F("error_code", "int16"),
                F("partition_index", "int32"),
                F("leader_id", "int32"),
                F("leader_epoch", "int32", "7+", default=-1),
                F("replica_nodes", "[]int32"),
                F("isr_nodes", "[]int32"),
                F("offline_replicas", "[]int32", "5+"),
            ),
            F("topic_authorized_operations", "int32", "8+", default=AUTHORIZED_OPERATIONS_OMITTED),
        ),
        F("cluster_authorized_operations", "int32", "8-10", default=AUTHORIZED_OPERATIONS_OMITTED),
    ),
)
