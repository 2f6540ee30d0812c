"""DescribeUserScramCredentials (key 50, KIP-554): version 0, flexible."""

from oncelog.protocol.schema import F, Message

# fmt: off
REQUEST = Message("DescribeUserScramCredentialsRequest", 50, "0", "0+", (
    F("users", "[]", "0+",
      F("name", "string"),
      nullable="0+", default=None),
))

RESPONSE = Message("DescribeUserScramCredentialsResponse", 50, "0", "0+", (
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("error_message", "string", "0+", nullable="0+", default=None),
    F("results", "[]", "0+",
      F("user", "string"),
      F("error_code", "int16"),
      F("error_message", "string", "0+", nullable="0+", default=None),
      F("credential_infos", "[]", "0+",
        F("mechanism", "int8"),
        F("iterations", "int32"))),
))
# fmt: on
