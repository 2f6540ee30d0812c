"""Records of Kafka's internal topics: an int16 version, then a schema-declared body of that version.

Shared by ``__transaction_state`` and ``__consumer_offsets`` codecs. Unlike requests, trailing bytes are an error.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from typing import Any

from oncelog.protocol import primitives as p
from oncelog.protocol.errors import DecodeError, EncodeError, ProtocolError
from oncelog.protocol.schema import Message

VERSION = struct.Struct(">h")


def split_version(data: bytes | bytearray | memoryview, what: str) -> tuple[int, memoryview]:
    """The leading int16 version and the body after it; ``what`` names the record in the error."""
    view = memoryview(data)
    if len(view) < VERSION.size:
        raise DecodeError(f"{what} too short for its version: {len(view)} bytes")
    return VERSION.unpack_from(view)[0], view[VERSION.size :]


def parse(message: Message, version: int, body: memoryview, *, allow_trailing: bool = False) -> Any:
    """Decode the whole body; anything malformed or left over raises DecodeError. With ``allow_trailing``, bytes
    after the declared fields are ignored (a later version's fields, for formats that only ever append)."""
    stream = p.Reader(body)
    try:
        result = message.construct(version).parse_stream(stream)
    except ProtocolError:
        raise
    except Exception as e:
        raise DecodeError(f"malformed {message.name} v{version}: {type(e).__name__}: {e}") from None
    if not allow_trailing and stream.tell() != stream.end:
        raise DecodeError(f"{stream.end - stream.tell()} trailing bytes after {message.name} v{version}")
    return result


def build(message: Message, version: int, body: Mapping[str, Any]) -> bytes:
    """The version prefix and the encoded body; raises EncodeError for values the schema refuses."""
    try:
        return VERSION.pack(version) + message.construct(version).build(body)
    except ProtocolError:
        raise
    except Exception as e:
        raise EncodeError(f"cannot encode {message.name} v{version}: {type(e).__name__}: {e}") from None
