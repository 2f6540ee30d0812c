"""DescribeCluster (key 60): versions 0-1 declared, flexible from 0; v1 adds the endpoint type (KIP-919)."""

from oncelog.protocol.schema import F, Message

#: KIP-919 endpoint types (Kafka's EndpointType): what a DescribeCluster asks to list.
ENDPOINT_TYPE_BROKER = 1
ENDPOINT_TYPE_CONTROLLER = 2

REQUEST = Message(
    "DescribeClusterRequest",
    60,
    "0-1",
    "0+",
    (
        F("include_cluster_authorized_operations", "bool"),
        F("endpoint_type", "int8", "1+", default=ENDPOINT_TYPE_BROKER),
    ),
)

RESPONSE = Message(
    "DescribeClusterResponse",
    60,
    "0-1",
    "0+",
    (
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", "0+", nullable="0+", default=None),
        F("endpoint_type", "int8", "1+", default=ENDPOINT_TYPE_BROKER),
        F("cluster_id", "string"),
        F("controller_id", "int32", "0+", default=-1),
        F(
            "brokers",
            "[]",
            "0+",
            F("broker_id", "int32"),
            F("host", "string"),
            F("port", "int32"),
            F("rack", "string", "0+", nullable="0+", default=None),
        ),
        F("cluster_authorized_operations", "int32", "0+", default=-(2**31)),  # Integer.MIN_VALUE: not requested
    ),
)
