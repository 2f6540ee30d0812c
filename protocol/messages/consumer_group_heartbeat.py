"""ConsumerGroupHeartbeat (key 68, KIP-848): versions 0-1 declared, flexible from 0; v1 adds the topic regex."""

from oncelog.protocol.schema import F, Message

REQUEST = Message(
    "ConsumerGroupHeartbeatRequest",
    68,
    "0-1",
    "0+",
    (
        F("group_id", "string"),
        F("member_id", "string"),
        F("member_epoch", "int32"),
        F("instance_id", "string", "0+", nullable="0+", default=None),
        F("rack_id", "string", "0+", nullable="0+", default=None),
        F("rebalance_timeout_ms", "int32", "0+", default=-1),
        F("subscribed_topic_names", "[]string", "0+", nullable="0+", default=None),
        F("subscribed_topic_regex", "string", "1+", nullable="1+", default=None),
        F("server_assignor", "string", "0+", nullable="0+", default=None),
        F(
            "topic_partitions",
            "[]",
            "0+",
            F("topic_id", "uuid"),
            F("partitions", "[]int32"),
            nullable="0+",
            default=None,
        ),
    ),
)

RESPONSE = Message(
    "ConsumerGroupHeartbeatResponse",
    68,
    "0-1",
    "0+",
    (
        F("throttle_time_ms", "int32"),
        F("error_code", "int16"),
        F("error_message", "string", "0+", nullable="0+", default=None),
        F("member_id", "string", "0+", nullable="0+", default=None),
        F("member_epoch", "int32"),
        F("heartbeat_interval_ms", "int32"),
        F(
            "assignment",
            "struct",
            "0+",
            F("topic_partitions", "[]", "0+", F("topic_id", "uuid"), F("partitions", "[]int32")),
            nullable="0+",
            default=None,
        ),
    ),
)
