"""LeaveGroup (key 13): versions 0-5 declared, flexible from 4; v3 leaves a batch of members (KIP-345),
v5 adds a reason per member."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "LeaveGroupRequest",
    13,
    "0-5",
    "4+",
    (
        F("group_id", "string"),
        F("member_id", "string", "0-2"),
        F(
            "members",
            "[]",
            "3+",
            F("member_id", "string"),
            F("group_instance_id", "string", "3+", nullable="3+", default=None),
            F("reason", "string", "5+", nullable="5+", default=None),
        ),
    ),
)

RESPONSE = Message(
    "LeaveGroupResponse",
    13,
    "0-5",
    "4+",
    (
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
        F(
            "members",
            "[]",
            "3+",
            F("member_id", "string"),
            F("group_instance_id", "string", "3+", nullable="3+"),
            F("error_code", "int16"),
        ),
    ),
)
