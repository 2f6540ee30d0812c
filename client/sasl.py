"""SASL for the bundled client: librdkafka's settings and the exchange run on each new connection.

With ``security_protocol`` SASL_PLAINTEXT or SASL_SSL (``client.security`` checks the name): ``sasl_mechanism``
PLAIN (default, as librdkafka's ``sasl.mechanism``), SCRAM-SHA-256 or SCRAM-SHA-512, and ``sasl_username`` /
``sasl_password``. The exchange follows Kafka's: SaslHandshake v1, then SaslAuthenticate requests until the
mechanism completes; a SCRAM server's final signature is checked, so a server that does not know the password is
refused too. A failure raises ``SaslAuthenticationError`` (not retriable: the connection is closed by the broker and
the settings must change).
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from oncelog.client.errors import ConfigError, SaslAuthenticationError, error_for
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.sasl import scram
from oncelog.protocol.sasl.plain import encode_plain

#: The security protocols that authenticate with SASL (SASL_SSL over TLS).
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", *scram.MECHANISMS)
#: SaslHandshake v1: the tokens travel in SaslAuthenticate requests (KIP-152).
HANDSHAKE_VERSION = 1


class Requester(Protocol):
    """The connection the exchange runs on (``client.connection.BrokerConnection``, which imports this module)."""

    async def request(self, key: ApiKey, body: Mapping[str, Any], *, version: int | None = None) -> Any: ...


@dataclass(frozen=True)
class SaslSettings:
    mechanism: str
    username: str
    password: str = field(repr=False)


def sasl_settings(
    security_protocol: str = "PLAINTEXT",
    sasl_mechanism: str = "PLAIN",
    sasl_username: str | None = None,
    sasl_password: str | None = None,
) -> SaslSettings | None:
    """Check librdkafka-named settings; None for a protocol without SASL. Raises ConfigError naming the property."""
    protocol = security_protocol.upper()
    if protocol not in SASL_PROTOCOLS:
        return None
    mechanism = sasl_mechanism.upper()
    if mechanism not in MECHANISMS:
        raise ConfigError(f"sasl.mechanism must be one of {', '.join(MECHANISMS)}; got {sasl_mechanism!r}")
    if not sasl_username or sasl_password is None:
        raise ConfigError(f"security.protocol={protocol} requires sasl.username and sasl.password")
    return SaslSettings(mechanism, sasl_username, sasl_password)


async def authenticate(conn: Requester, settings: SaslSettings) -> None:
    """Run the SASL exchange on a connection that has just negotiated API versions."""
    handshake = await conn.request(ApiKey.SASL_HANDSHAKE, {"mechanism": settings.mechanism}, version=HANDSHAKE_VERSION)
    if handshake.error_code != ErrorCode.NONE:
        raise error_for(
            handshake.error_code, f"{settings.mechanism} not enabled; the broker offers {list(handshake.mechanisms)}"
        )
    if settings.mechanism == "PLAIN":
        await _exchange(conn, encode_plain(settings.username, settings.password))
        return
    mechanism = settings.mechanism
    first = scram.ClientFirst(settings.username, scram.new_nonce())
    server_first = scram.ServerFirst.parse(await _exchange(conn, first.to_bytes()))
    if not server_first.nonce.startswith(first.nonce) or server_first.iterations < scram.MIN_ITERATIONS:
        raise SaslAuthenticationError("invalid SCRAM server first message", ErrorCode.SASL_AUTHENTICATION_FAILED)
    salted = scram.salted_password(mechanism, settings.password, server_first.salt, server_first.iterations)
    without_proof = f"c={base64.b64encode(first.gs2_header().encode()).decode()},r={server_first.nonce}"
    message = scram.auth_message(first, server_first, without_proof)
    proof = base64.b64encode(scram.client_proof(mechanism, salted, message)).decode()
    server_final = scram.ServerFinal.parse(await _exchange(conn, f"{without_proof},p={proof}".encode()))
    expected = scram.server_signature(mechanism, scram.server_key(mechanism, salted), message)
    if server_final.signature != expected:
        raise SaslAuthenticationError("the broker's SCRAM signature is wrong", ErrorCode.SASL_AUTHENTICATION_FAILED)


async def _exchange(conn: Requester, token: bytes) -> bytes:
    response = await conn.request(ApiKey.SASL_AUTHENTICATE, {"auth_bytes": token})
    if response.error_code != ErrorCode.NONE:
        raise error_for(response.error_code, response.error_message)
    return bytes(response.auth_bytes)
