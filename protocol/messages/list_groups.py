"""ListGroups (key 16): versions 0-5 declared, flexible from 3; v4 filters by state (KIP-518), v5 by type."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "ListGroupsRequest",
    16,
    "0-5",
    "3+",
    (
        F("states_filter", "[]string", "4+"),
        F("types_filter", "[]string", "5+"),
    ),
)

RESPONSE = Message(
    "ListGroupsResponse",
    16,
    "0-5",
    "3+",
    (
        F("throttle_time_ms", "int32", "1+"),
        F("error_code", "int16"),
        F(
            "groups",
            "[]",
            "0+",
            F("group_id", "string"),
            F("protocol_type", "string"),
            F("group_state", "string", "4+"),
            F("group_type", "string", "5+"),
        ),
    ),
)
