"""SaslAuthenticate (key 36, KIP-152): versions 0-2, flexible from 2; v1 adds the session lifetime (KIP-368)."""

from oncelog.protocol.schema import F, Message

# fmt: off
REQUEST = Message("SaslAuthenticateRequest", 36, "0-2", "2+", (
    F("auth_bytes", "bytes"),
))

RESPONSE = Message("SaslAuthenticateResponse", 36, "0-2", "2+", (
    F("error_code", "int16"),
    F("error_message", "string", "0+", nullable="0+", default=None),
    F("auth_bytes", "bytes"),
    F("session_lifetime_ms", "int64", "1+"),
))
# fmt: on
