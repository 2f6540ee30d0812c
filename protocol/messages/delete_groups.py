"""DeleteGroups (key 42): versions 0-2 declared, flexible from 2."""

from oncelog.protocol.schema import F, Message

REQUEST = Message("DeleteGroupsRequest", 42, "0-2", "2+", (F("groups_names", "[]string"),))

RESPONSE = Message(
    "DeleteGroupsResponse",
    42,
    "0-2",
    "2+",
    (
        F("throttle_time_ms", "int32"),
        F("results", "[]", "0+", F("group_id", "string"), F("error_code", "int16")),
    ),
)
