"""ConsumerGroupDescribe (key 69, KIP-848): version 0, flexible."""

from oncelog.protocol.schema import F, Field, Message

#: ConsumerGroupDescribeResponse's AuthorizedOperations default: INT32_MIN means "not requested".
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


def _assignment(name: str) -> Field:
    return F(
        name,
        "struct",
        "0+",
        F(
            "topic_partitions",
            "[]",
            "0+",
            F("topic_id", "uuid"),
            F("topic_name", "string"),
            F("partitions", "[]int32"),
        ),
    )


REQUEST = Message(
    "ConsumerGroupDescribeRequest",
    69,
    "0",
    "0+",
    (
        F("group_ids", "[]string"),
        F("include_authorized_operations", "bool"),
    ),
)

RESPONSE = Message(
    "ConsumerGroupDescribeResponse",
    69,
    "0",
    "0+",
    (
        F("throttle_time_ms", "int32"),
        F(
            "groups",
            "[]",
            "0+",
            F("error_code", "int16"),
            F("error_message", "string", "0+", nullable="0+", default=None),
            F("group_id", "string"),
            F("group_state", "string"),
            F("group_epoch", "int32"),
            F("assignment_epoch", "int32"),
            F("assignor_name", "string"),
            F(
                "members",
                "[]",
                "0+",
                F("member_id", "string"),
                F("instance_id", "string", "0+", nullable="0+", default=None),
                F("rack_id", "string", "0+", nullable="0+", default=None),
                F("member_epoch", "int32"),
                F("client_id", "string"),
                F("client_host", "string"),
                F("subscribed_topic_names", "[]string"),
                F("subscribed_topic_regex", "string", "0+", nullable="0+", default=None),
                _assignment("assignment"),
                _assignment("target_assignment"),
            ),
            F("authorized_operations", "int32", "0+", default=AUTHORIZED_OPERATIONS_OMITTED),
        ),
    ),
)
