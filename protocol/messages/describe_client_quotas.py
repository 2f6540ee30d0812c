"""DescribeClientQuotas (key 48, KIP-546): versions 0-1 declared, flexible from 1."""

from oncelog.protocol.schema import F, Message

#: DescribeClientQuotasRequest's match types: an exact name, the default entity, any specified name.
MATCH_TYPE_EXACT = 0
MATCH_TYPE_DEFAULT = 1
MATCH_TYPE_SPECIFIED = 2

# fmt: off
REQUEST = Message("DescribeClientQuotasRequest", 48, "0-1", "1+", (
    F("components", "[]", "0+",
      F("entity_type", "string"),
      F("match_type", "int8"),
      F("match", "string", "0+", nullable="0+")),
    F("strict", "bool"),
))

RESPONSE = Message("DescribeClientQuotasResponse", 48, "0-1", "1+", (
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", "0+", nullable="0+"),
    F("entries", "[]", "0+",
      F("entity", "[]", "0+",
        F("entity_type", "string"),
        F("entity_name", "string", "0+", nullable="0+")),
      F("values", "[]", "0+",
        F("key", "string"),
        F("value", "float64")),
      nullable="0+"),
))
# fmt: on
