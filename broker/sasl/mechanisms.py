"""Server sides of SASL/PLAIN and SASL/SCRAM, as Kafka's PlainSaslServer and ScramSaslServer behave.

``evaluate`` takes one client token and returns the server's reply token. A failure raises ``SaslFailure``: when
``visible`` is False the client is told only Kafka's generic "invalid credentials" message (Kafka's SaslException:
the reason may reveal whether a user exists); when True the message is sent as it is (Kafka's
SaslAuthenticationException). No message holds a password.
"""

from __future__ import annotations

import hmac
from typing import Protocol

from oncelog.broker.sasl.credentials import ScramCredentialStore
from oncelog.protocol.sasl.plain import PlainFormatError, parse_plain
from oncelog.protocol.sasl.scram import (
    MIN_ITERATIONS,
    ClientFinal,
    ClientFirst,
    ScramCredential,
    ScramFormatError,
    ServerFinal,
    ServerFirst,
    auth_message,
    new_nonce,
    server_signature,
    stored_key_from_proof,
)


class SaslFailure(Exception):
    """Authentication failed; ``visible``: the message may be shown to the client."""

    def __init__(self, message: str, *, visible: bool = False) -> None:
        super().__init__(message)
        self.visible = visible


class SaslServer(Protocol):
    mechanism: str
    #: True once the exchange succeeded.
    complete: bool
    #: The authenticated user once complete.
    authorization_id: str

    def evaluate(self, token: bytes) -> bytes: ...


class PlainServer:
    """One token ``authzid NUL user NUL password``, checked against the listener's PlainLoginModule users."""

    mechanism = "PLAIN"

    def __init__(self, passwords: dict[str, str]) -> None:
        self._passwords = passwords
        self.complete = False
        self.authorization_id = ""

    def evaluate(self, token: bytes) -> bytes:
        if self.complete:
            raise SaslFailure("Unexpected challenge in Sasl server state COMPLETE")
        try:
            plain = parse_plain(token)
        except PlainFormatError as exc:
            raise SaslFailure(str(exc)) from None
        if not plain.username:
            raise SaslFailure("Authentication failed: username not specified")
        if not plain.password:
            raise SaslFailure("Authentication failed: password not specified")
        if plain.authorization_id and plain.authorization_id != plain.username:
            raise SaslFailure(
                "Authentication failed: Client requested an authorization id that is different from username",
                visible=True,
            )
        expected = self._passwords.get(plain.username)
        if expected is None or not hmac.compare_digest(plain.password.encode(), expected.encode()):
            raise SaslFailure("Authentication failed: Invalid username or password")
        self.complete = True
        self.authorization_id = plain.username
        return b""


class ScramServer:
    """RFC 5802's two round trips: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, credentials: ScramCredentialStore) -> None:
        self.mechanism = mechanism
        self._credentials = credentials
        self.complete = False
        self.authorization_id = ""
        self._client_first: ClientFirst | None = None
        self._server_first: ServerFirst | None = None
        self._credential: ScramCredential | None = None
        self._failed = False

    def evaluate(self, token: bytes) -> bytes:
        if self._failed or self.complete:
            state = "FAILED" if self._failed else "COMPLETE"
            raise SaslFailure(f"Unexpected challenge in Sasl server state {state}")
        try:
            if self._client_first is None:
                return self._first(token)
            return self._final(token)
        except (SaslFailure, ScramFormatError) as exc:
            self._failed = True
            self._credential = None
            if isinstance(exc, SaslFailure):
                raise
            raise SaslFailure(str(exc)) from None

    def _first(self, token: bytes) -> bytes:
        first = ClientFirst.parse(token)
        if first.token_authenticated:
            # Delegation tokens (KIP-48) do not exist here: no token id can match, as Kafka answers an unknown one.
            raise SaslFailure(f"Token Authentication failed: Invalid tokenId : {first.username}")
        credential = self._credentials.get(first.username, self.mechanism)
        if credential is None:
            raise SaslFailure("Authentication failed: Invalid user credentials")
        if first.authorization_id and first.authorization_id != first.username:
            raise SaslFailure(
                "Authentication failed: Client requested an authorization id that is different from username",
                visible=True,
            )
        if credential.iterations < MIN_ITERATIONS:
            raise SaslFailure(f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS}")
        self._client_first = first
        self._credential = credential
        self._server_first = ServerFirst(first.nonce + new_nonce(), credential.salt, credential.iterations)
        return self._server_first.to_str().encode()

    def _final(self, token: bytes) -> bytes:
        assert self._client_first is not None and self._server_first is not None and self._credential is not None
        final = ClientFinal.parse(token)
        if final.nonce != self._server_first.nonce:
            raise SaslFailure("Invalid client nonce in the final client message.")
        message = auth_message(self._client_first, self._server_first, final.without_proof)
        computed = stored_key_from_proof(self.mechanism, self._credential, message, final.proof)
        if not hmac.compare_digest(computed, self._credential.stored_key):
            raise SaslFailure("Invalid client credentials")
        signature = server_signature(self.mechanism, self._credential.server_key, message)
        self._credential = None
        self.complete = True
        self.authorization_id = self._client_first.username
        return ServerFinal(signature).to_bytes()
