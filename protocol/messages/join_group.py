"""JoinGroup (key 11): versions 0-9 declared, flexible from 6.

v1 adds rebalance_timeout_ms, v4 the MEMBER_ID_REQUIRED round trip (KIP-394), v5 group_instance_id (KIP-345),
v7 protocol_type in the response, v8 reason, v9 skip_assignment.
"""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "JoinGroupRequest",
    11,
    "0-9",
    "6+",
    (
        F("group_id", "string"),
        F("session_timeout_ms", "int32"),
        F("rebalance_timeout_ms", "int32", "1+", default=-1),
        F("member_id", "string"),
        F("group_instance_id", "string", "5+", nullable="5+", default=None),
        F("protocol_type", "string"),
        F("protocols", "[]", "0+", F("name", "string"), F("metadata", "bytes")),
        F("reason", "string", "8+", nullable="8+", default=None),
    ),
)

RESPONSE = Message(
    "JoinGroupResponse",
    11,
    "0-9",
    "6+",
    (
        F("throttle_time_ms", "int32", "2+"),
        F("error_code", "int16"),
        F("generation_id", "int32", default=-1),
        F("protocol_type", "string", "7+", nullable="7+", default=None),
        F("protocol_name", "string", nullable="7+"),
        F("leader", "string"),
        F("skip_assignment", "bool", "9+"),
        F("member_id", "string"),
        F(
            "members",
            "[]",
            "0+",
            F("member_id", "string"),
            F("group_instance_id", "string", "5+", nullable="5+", default=None),
            F("metadata", "bytes"),
        ),
    ),
)
