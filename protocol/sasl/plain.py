"""SASL/PLAIN (RFC 4616) tokens: ``authzid NUL authcid NUL passwd``, UTF-8."""

from __future__ import annotations

from dataclasses import dataclass


class PlainFormatError(ValueError):
    """The token is not three NUL-separated UTF-8 fields."""


@dataclass(frozen=True)
class PlainToken:
    authorization_id: str
    username: str
    password: str = ""

    def __repr__(self) -> str:  # never show the password
        return f"PlainToken(authorization_id={self.authorization_id!r}, username={self.username!r})"


def encode_plain(username: str, password: str, authorization_id: str = "") -> bytes:
    """The client's only message."""
    return f"{authorization_id}\0{username}\0{password}".encode()


def parse_plain(token: bytes) -> PlainToken:
    """Split a client token as Kafka's PlainSaslServer does: exactly three fields, else PlainFormatError."""
    try:
        text = token.decode("utf-8")
    except UnicodeDecodeError:
        raise PlainFormatError("Invalid SASL/PLAIN response: not UTF-8") from None
    fields = text.split("\0")
    if len(fields) != 3:
        raise PlainFormatError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(fields)}")
    return PlainToken(*fields)
