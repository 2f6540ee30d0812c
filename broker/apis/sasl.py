"""SaslHandshake (17) and SaslAuthenticate (36) once a connection is past authentication, or on a listener without
SASL: Kafka's KafkaApis answers both with ILLEGAL_SASL_STATE (no re-authentication, KIP-368's
connections.max.reauth.ms being 0). The exchange itself runs before dispatch, in ``broker.sasl.session``."""

from __future__ import annotations

from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode


async def handle_handshake(broker: object, request: Request) -> dict:
    return {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}


async def handle_authenticate(broker: object, request: Request) -> dict:
    return {
        "error_code": ErrorCode.ILLEGAL_SASL_STATE,
        "error_message": "SaslAuthenticate request received after successful authentication",
        "auth_bytes": b"",
        "session_lifetime_ms": 0,
    }
