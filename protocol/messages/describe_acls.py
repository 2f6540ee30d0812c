"""DescribeAcls (key 29): versions 1-3 declared, flexible from 2 -- Kafka 4.0's range (KIP-896 removed v0).

v1 adds the resource pattern type, v3 the USER resource type (no layout change).
"""

from oncelog.protocol.schema import F, Message

#: Kafka's PatternType.LITERAL, the schemas' default pattern type.
PATTERN_TYPE_LITERAL = 3

# fmt: off
REQUEST = Message("DescribeAclsRequest", 29, "1-3", "2+", (
    F("resource_type_filter", "int8"),
    F("resource_name_filter", "string", "0+", nullable="0+"),
    F("pattern_type_filter", "int8", "1+", default=PATTERN_TYPE_LITERAL),
    F("principal_filter", "string", "0+", nullable="0+"),
    F("host_filter", "string", "0+", nullable="0+"),
    F("operation", "int8"),
    F("permission_type", "int8"),
))

RESPONSE = Message("DescribeAclsResponse", 29, "1-3", "2+", (
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", "0+", nullable="0+"),
    F("resources", "[]", "0+",
      F("resource_type", "int8"),
      F("resource_name", "string"),
      F("pattern_type", "int8", "1+", default=PATTERN_TYPE_LITERAL),
      F("acls", "[]", "0+",
        F("principal", "string"),
        F("host", "string"),
        F("operation", "int8"),
        F("permission_type", "int8"))),
))
# fmt: on
