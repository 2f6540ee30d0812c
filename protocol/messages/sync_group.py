"""SyncGroup (key 14): versions 0-5 declared, flexible from 4; v3 adds group_instance_id, v5 the protocol
type/name (checked against the group's, INCONSISTENT_GROUP_PROTOCOL)."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "SyncGroupRequest",
    14,
    "0-5",
    "4+",
    (
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
        F("protocol_type", "string", "5+", nullable="5+", default=None),
        F("protocol_name", "string", "5+", nullable="5+", default=None),
        F("assignments", "[]", "0+", F("member_id", "string"), F("assignment", "bytes")),
    ),
)

RESPONSE = Message(
    "SyncGroupResponse",
    14,
    "0-5",
    "4+",
    (
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
        F("protocol_type", "string", "5+", nullable="5+", default=None),
        F("protocol_name", "string", "5+", nullable="5+", default=None),
        F("assignment", "bytes"),
    ),
)
