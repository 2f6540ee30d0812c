"""AlterUserScramCredentials (key 51, KIP-554): version 0, flexible."""

from oncelog.protocol.schema import F, Message

# fmt: off
REQUEST = Message("AlterUserScramCredentialsRequest", 51, "0", "0+", (
    F("deletions", "[]", "0+",
      F("name", "string"),
      F("mechanism", "int8")),
    F("upsertions", "[]", "0+",
      F("name", "string"),
      F("mechanism", "int8"),
      F("iterations", "int32"),
      F("salt", "bytes"),
      F("salted_password", "bytes")),
))

RESPONSE = Message("AlterUserScramCredentialsResponse", 51, "0", "0+", (
    F("throttle_time_ms", "int32"),
    F("results", "[]", "0+",
      F("user", "string"),
      F("error_code", "int16"),
      F("error_message", "string", "0+", nullable="0+", default=None)),
))
# fmt: on
