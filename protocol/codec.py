"""Encode/decode whole request and response frames (the bytes after the 4-byte size prefix).

Bodies decode to construct ``Container`` s (attribute and item access) holding every field the API knows at
any version (absent ones at their defaults); bodies encode from dicts whose keys are fields of that message at
some version (a field this version lacks is left out; a key the message has at no version raises EncodeError).
Every decoding failure is a DecodeError; every encoding failure an EncodeError.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from construct import Container
from oncelog.protocol import primitives as p
from oncelog.protocol.api import SCHEMAS, SUPPORTED_VERSIONS, ApiKey
from oncelog.protocol.errors import DecodeError, EncodeError, ProtocolError
from oncelog.protocol.headers import (
    RequestHeader,
    decode_response_header,
    encode_request_header,
    encode_response_header,
    response_header_version,
)
from oncelog.protocol.schema import Message

#: Array elements one request may decode into, in all its arrays. The bytes alone allow one element per byte or
#: two (4M topic names in an 8 MB Metadata request), each a Python object of some 200 bytes; the largest requests
#: Kafka's clients send (a Fetch or OffsetCommit of every partition a consumer owns, a Metadata request naming
#: every topic) hold tens of thousands. Kafka has no such bound, only the bytes one.
MAX_REQUEST_ELEMENTS = 100_000


@functools.cache  # only valid (api, version) pairs are cached: a failed lookup raises
def _schema(api_key: int, version: int, index: int, error: type[ProtocolError]) -> Message:
    try:
        message = SCHEMAS[ApiKey(api_key)][index]
    except (KeyError, ValueError):
        raise error(f"no schema for api key {api_key}") from None
    if not message.has_version(version):
        raise error(f"{message.name} has no version {version}")
    return message


def _decode(
    message: Message,
    version: int,
    data: bytes | bytearray | memoryview,
    start: int,
    *,
    allow_trailing: bool = False,
    in_place: bool = False,
    max_elements: int | None = None,
) -> Container:
    if in_place and isinstance(data, memoryview):
        stream: p.Reader | p.ViewReader = p.ViewReader(data, max_elements)
    else:
        stream = p.Reader(data, max_elements)
    stream.seek(start)
    try:
        body = message.construct(version).parse_stream(stream)
    except ProtocolError:
        raise
    except Exception as e:
        raise DecodeError(f"malformed {message.name} v{version}: {type(e).__name__}: {e}") from None
    if stream.tell() != stream.end and not allow_trailing:
        raise DecodeError(f"{stream.end - stream.tell()} trailing bytes after {message.name} v{version}")
    return body


def _encode_into(out: Any, message: Message, version: int, body: Mapping[str, Any]) -> None:
    try:
        message.construct(version).build_stream(body, out)
    except EncodeError as e:
        raise EncodeError(f"cannot encode {message.name} v{version}: {e}") from None
    except ProtocolError:
        raise
    except Exception as e:
        raise EncodeError(f"cannot encode {message.name} v{version}: {type(e).__name__}: {e}") from None


def decode_request(
    header: RequestHeader, frame: bytes | bytearray | memoryview, *, max_elements: int | None = MAX_REQUEST_ELEMENTS
) -> Container:
    """Decode the request body at ``frame[header.header_size:]``; DecodeError for one holding more than
    ``max_elements`` array elements in all (None: any number the bytes can hold).

    Bytes after the last field are ignored, as Kafka's brokers do (AbstractRequest.parseRequest never checks for
    them); librdkafka 2.x sends such bytes after some flexible requests (seen: Metadata v9).

    A memoryview ``frame`` is decoded in place: its ``records`` fields come back as read-only views into it rather
    than copies, so it must stay unchanged while they are in use.
    """
    message = _schema(header.api_key, header.api_version, 0, DecodeError)
    return _decode(
        message,
        header.api_version,
        frame,
        header.header_size,
        allow_trailing=True,
        in_place=True,
        max_elements=max_elements,
    )


def encode_response(header: RequestHeader, body: Mapping[str, Any]) -> bytes:
    """Response header (v0, or v1 when flexible except ApiVersions) + body, without the size prefix."""
    message = _schema(header.api_key, header.api_version, 1, EncodeError)
    out = p.Reader(b"")
    out.write(
        encode_response_header(header.correlation_id, response_header_version(header.api_key, header.api_version))
    )
    _encode_into(out, message, header.api_version, body)
    return out.getvalue()


def encode_request(
    api_key: int, version: int, correlation_id: int, client_id: str | None, body: Mapping[str, Any]
) -> bytes:
    """Request header (v1, or v2 when flexible) + body, without the size prefix."""
    message = _schema(api_key, version, 0, EncodeError)
    out = p.Reader(b"")
    try:
        out.write(encode_request_header(api_key, version, correlation_id, client_id))
    except ProtocolError:
        raise
    except Exception as e:
        raise EncodeError(f"bad request header: {e}") from None
    _encode_into(out, message, version, body)
    return out.getvalue()


def decode_response(api_key: int, version: int, data: bytes | bytearray | memoryview) -> Container:
    """Decode a response (header included) to ``api_key``/``version``; returns the body only.

    Use ``decode_response_header`` for the correlation id.
    """
    message = _schema(api_key, version, 1, DecodeError)
    _, size = decode_response_header(data, api_key, version)
    return _decode(message, version, data, size)


def api_versions_v0_error_body(correlation_id: int, error_code: int) -> bytes:
    """ApiVersions v0 response (header v0 + body) with ``error_code`` and every advertised api key.

    Argument order (correlation_id, error_code) matches the broker's call site.

    Kafka answers an ApiVersions request of an unsupported version like this (KIP-511), so clients can
    parse it as v0 and retry with the advertised maximum.
    """
    body = {
        "error_code": int(error_code),
        "api_keys": [
            {"api_key": int(k), "min_version": lo, "max_version": hi}
            for k, (lo, hi) in sorted(SUPPORTED_VERSIONS.items())
        ],
    }
    out = p.Reader(b"")
    out.write(encode_response_header(correlation_id, 0))
    _encode_into(out, SCHEMAS[ApiKey.API_VERSIONS][1], 0, body)
    return out.getvalue()
