"""SaslHandshake (key 17, KIP-43): versions 0-1, never flexible.

v0 is followed by raw size-prefixed SASL tokens; v1 by SaslAuthenticate requests (KIP-152). Kafka 4.x still accepts
both (Kafka's SaslHandshakeRequest.json, validVersions 0-1).
"""

from oncelog.protocol.schema import F, Message

# fmt: off
REQUEST = Message("SaslHandshakeRequest", 17, "0-1", "none", (
    F("mechanism", "string"),
))

RESPONSE = Message("SaslHandshakeResponse", 17, "0-1", "none", (
    F("error_code", "int16"),
    F("mechanisms", "[]string"),
))
# fmt: on
