"""Kafka's SASL connection state machine (SaslServerAuthenticator), sans-IO.

A connection on a SASL listener may send, in this order: at most one ApiVersions, then SaslHandshake, then the
mechanism's tokens — in SaslAuthenticate requests after a v1 handshake, or as raw size-prefixed frames after a v0
one — until the mechanism completes; only then are other requests handled. What Kafka does otherwise:

- any other request before the handshake, or a second ApiVersions: the connection is closed, nothing is answered;
- a mechanism the listener does not enable: UNSUPPORTED_SASL_MECHANISM listing the enabled ones, then close;
- a request other than SaslAuthenticate while authenticating: ILLEGAL_SASL_STATE ("Unexpected Kafka request of type
  X during SASL authentication."), then close (we answer SaslHandshake and ApiVersions so; any other API key is
  closed without an answer);
- a failed exchange: SASL_AUTHENTICATION_FAILED with Kafka's message, then close (after a v0 handshake: close).

After success the session lifetime is 0 (``connections.max.reauth.ms`` is 0: no re-authentication, KIP-368).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from oncelog.broker.sasl.config import PLAIN, SaslListenerConfig
from oncelog.broker.sasl.credentials import ScramCredentialStore
from oncelog.broker.sasl.mechanisms import PlainServer, SaslFailure, SaslServer, ScramServer
from oncelog.protocol import ApiKey, ErrorCode

#: The first SaslHandshake version followed by SaslAuthenticate requests (KIP-152).
AUTHENTICATE_HEADERS_VERSION = 1


class State(enum.Enum):
    HANDSHAKE_OR_VERSIONS = "HANDSHAKE_OR_VERSIONS_REQUEST"
    HANDSHAKE = "HANDSHAKE_REQUEST"
    AUTHENTICATE = "AUTHENTICATE"
    COMPLETE = "COMPLETE"
    FAILED = "FAILED"


@dataclass(frozen=True)
class Step:
    """What the connection does next: answer ``response`` (a body for the request's header) or ``raw`` (a token
    frame), or hand the request to its normal handler (``handle``); then close the connection if ``close``."""

    response: dict | None = None
    raw: bytes | None = None
    handle: bool = False
    close: bool = False
    reason: str = ""


class SaslSession:
    """One connection's authentication on a SASL listener."""

    def __init__(self, config: SaslListenerConfig, credentials: ScramCredentialStore) -> None:
        self._config = config
        self._credentials = credentials
        self.state = State.HANDSHAKE_OR_VERSIONS
        self.server: SaslServer | None = None
        #: True after a v0 handshake: the next frames are raw SASL tokens, not Kafka requests.
        self.raw_tokens = False

    @property
    def complete(self) -> bool:
        return self.state is State.COMPLETE

    @property
    def user(self) -> str:
        return self.server.authorization_id if self.server is not None and self.server.complete else ""

    def _fail(self, reason: str, response: dict | None = None) -> Step:
        self.state = State.FAILED
        return Step(response=response, close=True, reason=reason)

    def on_request(self, api_key: int, version: int, body) -> Step:
        """A Kafka request (its header decoded; ``body`` decoded for ApiVersions / SaslHandshake / SaslAuthenticate,
        else None)."""
        if self.state in (State.HANDSHAKE_OR_VERSIONS, State.HANDSHAKE):
            if api_key == ApiKey.API_VERSIONS and self.state is State.HANDSHAKE_OR_VERSIONS:
                self.state = State.HANDSHAKE
                return Step(handle=True)
            if api_key == ApiKey.SASL_HANDSHAKE:
                return self._handshake(version, body.mechanism)
            return self._fail(f"Unexpected Kafka request of type {_name(api_key)} during SASL handshake.")
        if self.state is State.AUTHENTICATE and api_key == ApiKey.SASL_AUTHENTICATE:
            return self._authenticate(version, bytes(body.auth_bytes))
        message = f"Unexpected Kafka request of type {_name(api_key)} during SASL authentication."
        if api_key == ApiKey.SASL_HANDSHAKE:
            return self._fail(message, {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []})
        if api_key == ApiKey.API_VERSIONS:
            return self._fail(message, {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "api_keys": []})
        return self._fail(message)

    def _handshake(self, version: int, mechanism: str) -> Step:
        enabled = list(self._config.mechanisms)
        if mechanism not in enabled:
            return self._fail(
                f"Unsupported SASL mechanism {mechanism}",
                {"error_code": ErrorCode.UNSUPPORTED_SASL_MECHANISM, "mechanisms": enabled},
            )
        self.server = (
            PlainServer(self._config.plain_passwords)
            if mechanism == PLAIN
            else ScramServer(mechanism, self._credentials)
        )
        self.state = State.AUTHENTICATE
        self.raw_tokens = version < AUTHENTICATE_HEADERS_VERSION
        return Step(response={"error_code": ErrorCode.NONE, "mechanisms": enabled})

    def _evaluate(self, token: bytes) -> bytes:
        assert self.server is not None
        reply = self.server.evaluate(token)
        if self.server.complete:
            self.state = State.COMPLETE
        return reply

    def _authenticate(self, version: int, token: bytes) -> Step:
        assert self.server is not None
        try:
            reply = self._evaluate(token)
        except SaslFailure as exc:
            message = (
                str(exc)
                if exc.visible
                else (
                    f"Authentication failed during authentication due to invalid credentials with SASL mechanism "
                    f"{self.server.mechanism}"
                )
            )
            return self._fail(
                str(exc),
                {"error_code": ErrorCode.SASL_AUTHENTICATION_FAILED, "error_message": message, "auth_bytes": b""},
            )
        return Step(
            response={
                "error_code": ErrorCode.NONE,
                "error_message": None,
                "auth_bytes": reply,
                "session_lifetime_ms": 0,
            }
        )

    def on_raw_token(self, token: bytes) -> Step:
        """A raw token after a v0 handshake; a failure closes the connection without an answer, as Kafka does."""
        try:
            return Step(raw=self._evaluate(token))
        except SaslFailure as exc:
            return self._fail(str(exc))


def _name(api_key: int) -> str:
    try:
        return ApiKey(api_key).name
    except ValueError:
        return str(api_key)
