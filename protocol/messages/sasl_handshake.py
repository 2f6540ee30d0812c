"""SaslHandshake (key 17, KIP-43): versions 0-1, never flexible.

v0 is followed by raw size-prefixed SASL tokens; v1 by SaslAuthenticate requests (KIP-152). Kafka 4.x still accepts
both: KIP-896 kept v0 for kafka-python 2.0 (KAFKA-18270), and librdkafka looks for v0 in the advertised range before it
tries SASL at all.
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
