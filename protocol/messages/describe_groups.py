"""DescribeGroups (key 15): versions 0-5 declared, flexible from 5; v3 adds authorized operations, v4 the
members' group_instance_id."""

from oncelog.protocol.schema import F, Message

#: Kafka's "authorized operations not requested / unknown" value (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -2147483648

REQUEST = Message(
    "DescribeGroupsRequest",
    15,
    "0-5",
    "5+",
    (
        F("groups", "[]string"),
        F("include_authorized_operations", "bool", "3+"),
    ),
)

RESPONSE = Message(
    "DescribeGroupsResponse",
    15,
    "0-5",
    "5+",
    (
        F("throttle_time_ms", "int32", "1+"),
        F(
            "groups",
            "[]",
            "0+",
            F("error_code", "int16"),
            F("group_id", "string"),
            F("group_state", "string"),
            F("protocol_type", "string"),
            F("protocol_data", "string"),
            F(
                "members",
                "[]",
                "0+",
                F("member_id", "string"),
                F("group_instance_id", "string", "4+", nullable="4+", default=None),
                F("client_id", "string"),
                F("client_host", "string"),
                F("member_metadata", "bytes"),
                F("member_assignment", "bytes"),
            ),
            F("authorized_operations", "int32", "3+", default=AUTHORIZED_OPERATIONS_OMITTED),
        ),
    ),
)
