"""Sample bodies generated from a message schema, the expected decode of a body at a version, and helpers for
golden-bytes tests."""

from __future__ import annotations

import itertools
import uuid
from typing import Any

from oncelog.protocol import ApiKey, decode_request, decode_request_header, encode_request, encode_response
from oncelog.protocol.schema import Field, Message, Versions

_counter = itertools.count(1)
_STRINGS = ["topic-ü", "日本語", "", "a" * 40, "x.y_z-1"]


def _primitive(t: str, nullable: bool, variant: int) -> Any:
    n = next(_counter)
    if nullable and variant == 1:
        return None
    if t == "int8":
        return (n % 200) - 100
    if t == "int16":
        return -((n * 37) % 30000)
    if t == "int32":
        return n * 100_003 * (-1 if n % 3 == 0 else 1)
    if t == "int64":
        return n * 10_000_000_019
    if t == "float64":
        return n * -0.25  # exact in binary, so it round-trips unchanged
    if t == "bool":
        return n % 2 == 0
    if t == "string":
        return _STRINGS[n % len(_STRINGS)]
    if t in ("bytes", "records"):
        return bytes(range(n % 7)) * 3
    if t == "uuid":
        return uuid.UUID(int=n * 0x1234567890ABCDEF)
    raise AssertionError(t)


def sample(fields: tuple[Field, ...], version: int, variant: int = 0) -> dict[str, Any]:
    """A body with every field the version has; variant 1 uses nulls/empties where allowed."""
    out: dict[str, Any] = {}
    for f in fields:
        if version not in Versions.parse(f.versions):
            continue
        nullable = version in Versions.parse(f.nullable)
        if f.type == "[]":
            if nullable and variant == 1:
                out[f.name] = None
            else:
                count = 0 if variant == 2 else 2
                out[f.name] = [sample(f.children, version, variant) for _ in range(count)]
        elif f.type.startswith("[]"):
            if nullable and variant == 1:
                out[f.name] = None
            else:
                out[f.name] = [] if variant == 2 else [_primitive(f.type[2:], False, 0) for _ in range(3)]
        elif f.type == "struct":
            out[f.name] = sample(f.children, version, variant)
        else:
            out[f.name] = _primitive(f.type, nullable, variant)
    return out


def expected(fields: tuple[Field, ...], version: int, body: dict[str, Any]) -> dict[str, Any]:
    """What decoding ``body`` encoded at ``version`` must give: absent fields at their defaults."""
    out: dict[str, Any] = {}
    for f in fields:
        present = version in Versions.parse(f.versions)
        if not present or f.name not in body:
            out[f.name] = f.default_value().make()
            if f.type == "struct":
                out[f.name] = expected(f.children, version, {})
            continue
        value = body[f.name]
        if f.type == "[]" and value is not None:
            value = [expected(f.children, version, item) for item in value]
        elif f.type == "struct":
            value = expected(f.children, version, value)
        out[f.name] = value
    return out


def plain(value: Any) -> Any:
    """Containers/lists to plain dicts/lists, for equality checks."""
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def versions_of(message: Message) -> list[int]:
    """Every declared version of ``message``."""
    return [v for v in range(0, 40) if message.has_version(v)]


def from_hex(text: str) -> bytes:
    """Bytes from hex digits written in groups (white space is ignored)."""
    return bytes.fromhex("".join(text.split()))


def decode_frame(frame: bytes) -> Any:
    """The body of a whole request frame (header included), decoded."""
    return decode_request(decode_request_header(frame), frame)


def response_bytes(key: ApiKey, version: int, body: dict) -> bytes:
    """``body`` encoded as the answer to a request with correlation id 7."""
    return encode_response(decode_request_header(encode_request(key, version, 7, "c", {})), body)
