"""DeleteAcls (key 31): versions 1-3 declared, flexible from 2 -- Kafka 4.0's range (KIP-896 removed v0)."""

from oncelog.protocol.messages.describe_acls import PATTERN_TYPE_LITERAL
from oncelog.protocol.schema import F, Message

# fmt: off
REQUEST = Message("DeleteAclsRequest", 31, "1-3", "2+", (
    F("filters", "[]", "0+",
      F("resource_type_filter", "int8"),
      F("resource_name_filter", "string", "0+", nullable="0+"),
      F("pattern_type_filter", "int8", "1+", default=PATTERN_TYPE_LITERAL),
      F("principal_filter", "string", "0+", nullable="0+"),
      F("host_filter", "string", "0+", nullable="0+"),
      F("operation", "int8"),
      F("permission_type", "int8")),
))

RESPONSE = Message("DeleteAclsResponse", 31, "1-3", "2+", (
    F("throttle_time_ms", "int32"),
    F("filter_results", "[]", "0+",
      F("error_code", "int16"),
      F("error_message", "string", "0+", nullable="0+"),
      F("matching_acls", "[]", "0+",
        F("error_code", "int16"),
        F("error_message", "string", "0+", nullable="0+"),
        F("resource_type", "int8"),
        F("resource_name", "string"),
        F("pattern_type", "int8", "1+", default=PATTERN_TYPE_LITERAL),
        F("principal", "string"),
        F("host", "string"),
        F("operation", "int8"),
        F("permission_type", "int8"))),
))
# fmt: on
