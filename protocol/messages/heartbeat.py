"""Heartbeat (key 12): versions 0-4 declared, flexible from 4; v3 adds group_instance_id."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "HeartbeatRequest",
    12,
    "0-4",
    "4+",
    (
        F("group_id", "string"),
        F("generation_id", "int32"),
        F("member_id", "string"),
        F("group_instance_id", "string", "3+", nullable="3+", default=None),
    ),
)

RESPONSE = Message(
    "HeartbeatResponse",
    12,
    "0-4",
    "4+",
    (
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
    ),
)
