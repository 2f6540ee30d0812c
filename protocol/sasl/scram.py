"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka implements them (ScramFormatter, ScramMessages).

Pure computations and message formats, used by the broker's SCRAM server and the bundled client. Kafka does no
SASLprep: names and passwords are taken as UTF-8 bytes; only the GS2 header ``n,,`` / ``n,a=...,`` (no channel
binding) is accepted; ``=2C`` / ``=3D`` escape ``,`` / ``=`` in names (RFC 5802 section 5.1).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass, field

#: Kafka's ScramMechanism: name -> (hash name, type id used by KIP-554's APIs).
MECHANISMS: dict[str, tuple[str, int]] = {"SCRAM-SHA-256": ("sha256", 1), "SCRAM-SHA-512": ("sha512", 2)}
#: KIP-554 mechanism type ids -> name (0 is Kafka's ScramMechanism.UNKNOWN).
MECHANISM_BY_TYPE: dict[int, str] = {type_id: name for name, (_, type_id) in MECHANISMS.items()}
#: Kafka's ScramMechanism.minIterations (4096 for both hashes, RFC 7677's recommendation).
MIN_ITERATIONS = 4096
#: Kafka's ScramControlManager.MAX_ITERATIONS: AlterUserScramCredentials refuses more.
MAX_ITERATIONS = 16384
#: The SCRAM extension Kafka understands (delegation tokens, KIP-48): ``tokenauth=true`` in the client-first message.
TOKEN_AUTH_EXTENSION = "tokenauth"


class ScramFormatError(ValueError):
    """A SCRAM message does not have the RFC 5802 form Kafka accepts."""


def is_scram(mechanism: str) -> bool:
    return mechanism in MECHANISMS


def _hash_name(mechanism: str) -> str:
    return MECHANISMS[mechanism][0]


def hmac_digest(mechanism: str, key: bytes, data: bytes) -> bytes:
    return hmac.new(key, data, _hash_name(mechanism)).digest()


def digest(mechanism: str, data: bytes) -> bytes:
    return hashlib.new(_hash_name(mechanism), data).digest()


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(password, salt, i) of RFC 5802 section 2.2: PBKDF2 with the mechanism's HMAC."""
    return hashlib.pbkdf2_hmac(_hash_name(mechanism), password.encode(), salt, iterations)


def client_key(mechanism: str, salted: bytes) -> bytes:
    return hmac_digest(mechanism, salted, b"Client Key")


def server_key(mechanism: str, salted: bytes) -> bytes:
    return hmac_digest(mechanism, salted, b"Server Key")


def stored_key(mechanism: str, client_key_bytes: bytes) -> bytes:
    return digest(mechanism, client_key_bytes)


@dataclass(frozen=True)
class ScramCredential:
    """What a server keeps of a password (RFC 5802 section 3): never the password or the salted password."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def __repr__(self) -> str:
        return f"ScramCredential(iterations={self.iterations}, keys=[hidden])"

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted: bytes, iterations: int) -> ScramCredential:
        """As Kafka's ScramControlManager turns an AlterUserScramCredentials upsertion into a credential."""
        keys = stored_key(mechanism, client_key(mechanism, salted)), server_key(mechanism, salted)
        return cls(salt, *keys, iterations)

    @classmethod
    def from_password(
        cls, mechanism: str, password: str, iterations: int, salt: bytes | None = None
    ) -> ScramCredential:
        salt = salt if salt is not None else secrets.token_bytes(32)
        return cls.from_salted_password(
            mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
        )


def escape_name(name: str) -> str:
    """saslname of RFC 5802 section 5.1."""
    return name.replace("=", "=3D").replace(",", "=2C")


def unescape_name(saslname: str) -> str:
    """Kafka's ScramFormatter.username: ``=2C`` -> ``,``, ``=3D`` -> ``=``; any other ``=`` is malformed."""
    if re.search(r"=(?!2C|3D)", saslname):
        raise ScramFormatError("Invalid SCRAM username")
    return saslname.replace("=2C", ",").replace("=3D", "=")


def new_nonce() -> str:
    """A random printable nonce (no ``,``), as Kafka's secureRandomString (130 random bits)."""
    return secrets.token_urlsafe(24)


_SASLNAME = r"(?:[^=,]|=2C|=3D)+"
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"
_EXTENSIONS = r"(?:,[A-Za-z]+=[^,]*)*"
_BASE64 = r"[A-Za-z0-9+/]*={0,2}"
_CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>n=(?P<saslname>{_SASLNAME}),r=(?P<nonce>{_PRINTABLE})"
    rf"(?P<extensions>{_EXTENSIONS}))"
)
_SERVER_FIRST = re.compile(
    rf"(?:m=[^,]*,)?r=(?P<nonce>{_PRINTABLE}),s=(?P<salt>{_BASE64}),i=(?P<iterations>[0-9]+)(?:,.*)?"
)
_CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS})),"
    rf"p=(?P<proof>{_BASE64})"
)
_SERVER_FINAL = re.compile(rf"(?:e=(?P<error>[^,]*)|v=(?P<signature>{_BASE64}))(?:,.*)?")


def _base64(text: str) -> bytes:
    """The bytes of a base64 field; ScramFormatError when its length is not whole (the pattern checked its alphabet)."""
    try:
        return base64.b64decode(text, validate=True)
    except binascii.Error as exc:
        raise ScramFormatError(f"Invalid base64 in SCRAM message: {exc}") from None


def _text(message: bytes) -> str:
    try:
        return message.decode("utf-8")
    except UnicodeDecodeError:
        raise ScramFormatError("SCRAM message is not UTF-8") from None


def _extensions(text: str) -> dict[str, str]:
    return dict(item.split("=", 1) for item in text.split(",") if item)


@dataclass(frozen=True)
class ClientFirst:
    """client-first-message: GS2 header ``n,[a=authzid],`` then the bare part."""

    username: str
    nonce: str
    authorization_id: str = ""
    extensions: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, message: bytes) -> ClientFirst:
        match = _CLIENT_FIRST.fullmatch(_text(message))
        if match is None:
            raise ScramFormatError("Invalid SCRAM client first message format")
        authzid = match["authzid"] or ""
        return cls(
            unescape_name(match["saslname"]),
            match["nonce"],
            unescape_name(authzid) if authzid else "",
            _extensions(match["extensions"]),
        )

    def bare(self) -> str:
        ext = "".join(f",{k}={v}" for k, v in self.extensions.items())
        return f"n={escape_name(self.username)},r={self.nonce}{ext}"

    def gs2_header(self) -> str:
        return f"n,{'a=' + escape_name(self.authorization_id) if self.authorization_id else ''},"

    def to_bytes(self) -> bytes:
        return (self.gs2_header() + self.bare()).encode()

    @property
    def token_authenticated(self) -> bool:
        return self.extensions.get(TOKEN_AUTH_EXTENSION, "").lower() == "true"


@dataclass(frozen=True)
class ServerFirst:
    nonce: str  # the client's nonce followed by the server's
    salt: bytes
    iterations: int

    @classmethod
    def parse(cls, message: bytes) -> ServerFirst:
        match = _SERVER_FIRST.fullmatch(_text(message))
        if match is None:
            raise ScramFormatError("Invalid SCRAM server first message format")
        return cls(match["nonce"], _base64(match["salt"]), int(match["iterations"]))

    def to_str(self) -> str:
        return f"r={self.nonce},s={base64.b64encode(self.salt).decode()},i={self.iterations}"


@dataclass(frozen=True)
class ClientFinal:
    channel_binding: str  # base64 of the GS2 header
    nonce: str
    proof: bytes
    without_proof: str

    @classmethod
    def parse(cls, message: bytes) -> ClientFinal:
        match = _CLIENT_FINAL.fullmatch(_text(message))
        if match is None:
            raise ScramFormatError("Invalid SCRAM client final message format")
        return cls(match["channel"], match["nonce"], _base64(match["proof"]), match["without_proof"])


@dataclass(frozen=True)
class ServerFinal:
    signature: bytes | None
    error: str | None = None

    @classmethod
    def parse(cls, message: bytes) -> ServerFinal:
        match = _SERVER_FINAL.fullmatch(_text(message))
        if match is None:
            raise ScramFormatError("Invalid SCRAM server final message format")
        if match["error"] is not None:
            return cls(None, match["error"])
        return cls(_base64(match["signature"]))

    def to_bytes(self) -> bytes:
        if self.error is not None:
            return f"e={self.error}".encode()
        assert self.signature is not None
        return f"v={base64.b64encode(self.signature).decode()}".encode()


def auth_message(client_first: ClientFirst, server_first: ServerFirst, client_final_without_proof: str) -> bytes:
    """AuthMessage of RFC 5802 section 3."""
    return f"{client_first.bare()},{server_first.to_str()},{client_final_without_proof}".encode()


def client_proof(mechanism: str, salted: bytes, message: bytes) -> bytes:
    """ClientKey XOR HMAC(StoredKey, AuthMessage)."""
    key = client_key(mechanism, salted)
    signature = hmac_digest(mechanism, stored_key(mechanism, key), message)
    return bytes(a ^ b for a, b in zip(key, signature, strict=True))


def stored_key_from_proof(mechanism: str, credential: ScramCredential, message: bytes, proof: bytes) -> bytes:
    """H(ClientProof XOR ClientSignature): equals the stored key exactly when the proof is right."""
    signature = hmac_digest(mechanism, credential.stored_key, message)
    if len(proof) != len(signature):
        return b""
    return digest(mechanism, bytes(a ^ b for a, b in zip(proof, signature, strict=True)))


def server_signature(mechanism: str, server_key_bytes: bytes, message: bytes) -> bytes:
    return hmac_digest(mechanism, server_key_bytes, message)
