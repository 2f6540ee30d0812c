"""Request headers v1/v2 and response headers v0/v1 (KIP-482 made v2/v1 the flexible forms).

Request header: api_key int16, api_version int16, correlation_id int32, client_id nullable string with an
int16 length even in v2 (so any broker can read an ApiVersions request), then in v2 a tagged-field section.
Response header: correlation_id int32, then in v1 a tagged-field section. ApiVersions responses always use
header v0 so a client can read them before it knows the broker's versions (KIP-511).
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Mapping
from dataclasses import dataclass

from oncelog.protocol import primitives as p
from oncelog.protocol.api import SCHEMAS, SUPPORTED_VERSIONS, ApiKey
from oncelog.protocol.errors import DecodeError, ProtocolError, UnsupportedVersionError

_FIXED = struct.Struct(">hhi")
_CORRELATION = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    """A decoded request header; the body starts at ``frame[header_size:]``."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    header_size: int


@functools.cache
def request_header_version(api_key: int, api_version: int) -> int:
    """2 when the request version is flexible, else 1."""
    return 2 if SCHEMAS[ApiKey(api_key)][0].is_flexible(api_version) else 1


@functools.cache
def response_header_version(api_key: int, api_version: int) -> int:
    """1 when the response version is flexible, else 0; always 0 for ApiVersions."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if SCHEMAS[ApiKey(api_key)][1].is_flexible(api_version) else 0


_API_KEYS: dict[int, ApiKey] = {int(key): key for key in ApiKey}
_CLIENT_ID_LENGTH = struct.Struct(">h")


def _as_key(api_key: int) -> int:
    return _API_KEYS.get(api_key, api_key)


def _read_client_id(frame: bytes | bytearray | memoryview, start: int) -> tuple[str | None, int]:
    """The nullable client id (int16 length) at ``start`` and the offset after it; DecodeError if malformed."""
    if len(frame) < start + _CLIENT_ID_LENGTH.size:
        raise DecodeError("request header truncated in client_id")
    (length,) = _CLIENT_ID_LENGTH.unpack_from(frame, start)
    start += _CLIENT_ID_LENGTH.size
    if length == -1:
        return None, start
    end = start + length
    if length < 0 or end > len(frame):
        raise DecodeError(f"invalid client_id length {length}")
    try:
        return str(frame[start:end], "utf-8"), end
    except UnicodeDecodeError as e:
        raise DecodeError(f"client_id is not UTF-8: {e}") from None


def _skip_tagged_at(frame: bytes | bytearray | memoryview, start: int) -> int:
    """The offset after the tagged-field section at ``start`` (one zero byte when empty, as clients send it)."""
    if start < len(frame) and frame[start] == 0:
        return start + 1
    stream = p.Reader(frame)
    stream.seek(start)
    p.skip_tagged(stream)
    return stream.tell()


def decode_request_header(
    frame: bytes | bytearray | memoryview, versions: Mapping[ApiKey, tuple[int, int]] | None = None
) -> RequestHeader:
    """Decode the header at the start of ``frame`` (the bytes after the size prefix).

    ``versions`` (default SUPPORTED_VERSIONS) is what we serve. Raises UnsupportedVersionError carrying the
    partially decoded header for any other key/version, DecodeError for malformed input.
    """
    versions = SUPPORTED_VERSIONS if versions is None else versions
    if len(frame) < _FIXED.size:
        raise DecodeError("request header truncated")
    api_key, api_version, correlation_id = _FIXED.unpack_from(frame, 0)
    key = _as_key(api_key)
    span = versions.get(key) if isinstance(key, ApiKey) else None
    if span is None or not span[0] <= api_version <= span[1]:
        try:
            client_id, size = _read_client_id(frame, _FIXED.size)
        except DecodeError:
            client_id, size = None, _FIXED.size
        raise UnsupportedVersionError(RequestHeader(key, api_version, correlation_id, client_id, size))
    client_id, size = _read_client_id(frame, _FIXED.size)
    if request_header_version(key, api_version) >= 2:
        try:
            size = _skip_tagged_at(frame, size)
        except ProtocolError:
            raise
        except Exception as e:
            raise DecodeError(f"bad request header: {e}") from None
    return RequestHeader(key, api_version, correlation_id, client_id, size)


def encode_request_header(api_key: int, api_version: int, correlation_id: int, client_id: str | None) -> bytes:
    """Request header v1 or v2 (by the request's flexibility), as a client sends it."""
    out = p.Reader(b"")
    out.write(_FIXED.pack(api_key, api_version, correlation_id))
    p.write_string(out, client_id, False, True)
    if request_header_version(api_key, api_version) >= 2:
        out.write(b"\x00")
    return out.getvalue()


def encode_response_header(correlation_id: int, header_version: int) -> bytes:
    """Response header v0 (correlation id) or v1 (plus an empty tagged-field section)."""
    head = _CORRELATION.pack(correlation_id)
    return head + b"\x00" if header_version >= 1 else head


def decode_response_header(data: bytes | bytearray | memoryview, api_key: int, api_version: int) -> tuple[int, int]:
    """Return (correlation_id, header_size) of a response to (api_key, api_version)."""
    if len(data) < 4:
        raise DecodeError("response header truncated")
    (correlation_id,) = _CORRELATION.unpack_from(data, 0)
    if response_header_version(api_key, api_version) == 0:
        return correlation_id, 4
    stream = p.Reader(data)
    stream.seek(4)
    p.skip_tagged(stream)
    return correlation_id, stream.tell()
