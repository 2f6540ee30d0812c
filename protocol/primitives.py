"""Kafka protocol primitive types as construct classes that the construct compiler can inline.

Every class here parses and builds like construct's own classes and also emits Python source for
``Construct.compile()`` (``_emitparse`` / ``_emitbuild``), so a compiled message has no per-field dispatch.
Guarantees shared by all readers:

- malformed or truncated input raises :class:`DecodeError` (never a bare construct/struct error);
- a length or element count is checked against the bytes remaining BEFORE anything is allocated;
- a stream may carry an element budget (``elements_left``): the array elements decoded from it in all, beyond
  which decoding fails, bounding the objects a small but dense message decodes into;
- varints are at most 5 bytes (unsigned 32-bit) and varlongs at most 10 bytes, as in Kafka's ByteUtils.

Compact ("flexible", KIP-482) encodings store length+1 as an unsigned varint, 0 meaning null.
"""

from __future__ import annotations

import io
import struct
import uuid
from collections.abc import Callable
from typing import Any

from construct import Construct, Container
from oncelog.protocol.errors import DecodeError, EncodeError

# --------------------------------------------------------------------------------------------------
# Input stream: a BytesIO that knows where the message ends.


class Reader(io.BytesIO):
    """Input stream over ``data``; ``end`` is the absolute end offset (the decoder never reads past it)."""

    def __init__(self, data: bytes | bytearray | memoryview, elements_left: int | None = None) -> None:
        super().__init__(data)
        self.end = len(data) if not isinstance(data, memoryview) else data.nbytes
        #: Array elements this stream may still decode (None: no bound beyond the bytes).
        self.elements_left = elements_left


class ViewReader:
    """Input stream over a memoryview that reads in place: ``read`` copies out small fields as bytes, and
    ``records`` fields come back as read-only views into ``data`` (see ``read_records``), so a large Produce request
    is never copied. Slower per field than ``Reader``; meant for large frames. ``data`` must stay unchanged while
    any view into it lives."""

    __slots__ = ("_pos", "_view", "elements_left", "end")

    def __init__(self, data: memoryview, elements_left: int | None = None) -> None:
        self._view = data.toreadonly().cast("B")
        self._pos = 0
        self.end = self._view.nbytes
        self.elements_left = elements_left

    def read(self, n: int = -1) -> bytes:
        start = self._pos
        stop = self.end if n < 0 else min(start + n, self.end)
        self._pos = stop
        return bytes(self._view[start:stop])

    def read_view(self, n: int) -> memoryview:
        """The next ``n`` bytes as a view (the caller checked that they remain)."""
        start = self._pos
        self._pos = start + n
        return self._view[start : start + n]

    def tell(self) -> int:
        return self._pos

    def seek(self, pos: int) -> int:
        self._pos = pos
        return pos


def remaining(stream: io.BytesIO) -> int:
    """Bytes left in ``stream`` (works for plain BytesIO too, slower)."""
    try:
        return stream.end - stream.tell()  # type: ignore[attr-defined]
    except AttributeError:
        return stream.getbuffer().nbytes - stream.tell()


def take(stream: io.BytesIO, n: int) -> bytes:
    """Read exactly ``n`` bytes; raise DecodeError if fewer remain (checked before reading)."""
    if n < 0 or n > remaining(stream):
        raise DecodeError(f"length {n} exceeds the {remaining(stream)} bytes remaining")
    return stream.read(n)


def take_exact(stream: io.BytesIO, n: int) -> bytes:
    """Read a small fixed-size chunk; raise DecodeError when the input is truncated."""
    b = stream.read(n)
    if len(b) != n:
        raise DecodeError(f"truncated: wanted {n} bytes, got {len(b)}")
    return b


# --------------------------------------------------------------------------------------------------
# Low-level readers/writers (shared by the interpreted classes and the generated code).

_U8 = struct.Struct(">B")
_SMALL = [bytes((i,)) for i in range(256)]
_MISSING = object()


def read_uvarint(stream: io.BytesIO) -> int:
    """Unsigned varint of at most 5 bytes whose value fits in 32 bits."""
    result = 0
    shift = 0
    while True:
        b = stream.read(1)
        if not b:
            raise DecodeError("truncated varint")
        byte = b[0]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if result > 0xFFFFFFFF:
                raise DecodeError("varint exceeds 32 bits")
            return result
        shift += 7
        if shift > 28:
            raise DecodeError("varint longer than 5 bytes")


def read_uvarlong(stream: io.BytesIO) -> int:
    """Unsigned varlong of at most 10 bytes whose value fits in 64 bits."""
    result = 0
    shift = 0
    while True:
        b = stream.read(1)
        if not b:
            raise DecodeError("truncated varlong")
        byte = b[0]
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if result > 0xFFFFFFFFFFFFFFFF:
                raise DecodeError("varlong exceeds 64 bits")
            return result
        shift += 7
        if shift > 63:
            raise DecodeError("varlong longer than 10 bytes")


def uvarint_bytes(value: int) -> bytes:
    """Encoding of an unsigned varint (``value`` must be in 0..2**64-1)."""
    if 0 <= value < 0x80:
        return _SMALL[value]
    if value < 0 or value > 0xFFFFFFFFFFFFFFFF:
        raise EncodeError(f"varint out of range: {value}")
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def write_uvarint(stream: io.BytesIO, value: int) -> None:
    """Write an unsigned varint."""
    stream.write(uvarint_bytes(value))


def read_varint(stream: io.BytesIO) -> int:
    """Zigzag-encoded signed 32-bit varint."""
    n = read_uvarint(stream)
    return (n >> 1) ^ -(n & 1)


def read_varlong(stream: io.BytesIO) -> int:
    """Zigzag-encoded signed 64-bit varlong."""
    n = read_uvarlong(stream)
    return (n >> 1) ^ -(n & 1)


def write_varint(stream: io.BytesIO, value: int) -> None:
    """Write a zigzag signed 32-bit varint."""
    if not -(2**31) <= value < 2**31:
        raise EncodeError(f"varint out of range: {value}")
    write_uvarint(stream, ((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def write_varlong(stream: io.BytesIO, value: int) -> None:
    """Write a zigzag signed 64-bit varlong."""
    if not -(2**63) <= value < 2**63:
        raise EncodeError(f"varlong out of range: {value}")
    write_uvarint(stream, ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def read_length(stream: io.BytesIO, compact: bool, wide: bool) -> int:
    """A string/bytes/array length: -1 means null. ``wide`` selects int32 (bytes, arrays) over int16."""
    if compact:
        return read_uvarint(stream) - 1
    if wide:
        return _I32.unpack(take_exact(stream, 4))[0]
    return _I16.unpack(take_exact(stream, 2))[0]


def write_length(stream: io.BytesIO, n: int, compact: bool, wide: bool) -> None:
    """Write a length (-1 = null) in the chosen form."""
    if compact:
        stream.write(uvarint_bytes(n + 1))
    elif wide:
        stream.write(_I32.pack(n))
    else:
        if n > 0x7FFF:
            raise EncodeError(f"string of {n} bytes is longer than an int16 length allows")
        stream.write(_I16.pack(n))


def read_string(stream: io.BytesIO, compact: bool, nullable: bool) -> str | None:
    """UTF-8 string; null only where ``nullable``."""
    n = read_length(stream, compact, False)
    if n < 0:
        if nullable and n == -1:
            return None
        raise DecodeError(f"invalid string length {n}")
    try:
        return take(stream, n).decode("utf-8")
    except UnicodeDecodeError as e:
        raise DecodeError(f"string is not UTF-8: {e}") from None


def write_string(stream: io.BytesIO, value: str | None, compact: bool, nullable: bool) -> None:
    """Write a string; None is written as null (EncodeError if not ``nullable``)."""
    if value is None:
        if not nullable:
            raise EncodeError("null in a non-nullable string")
        write_length(stream, -1, compact, False)
        return
    data = value.encode("utf-8")
    write_length(stream, len(data), compact, False)
    stream.write(data)


def _bytes_length(stream: io.BytesIO, compact: bool, nullable: bool) -> int | None:
    """A bytes/records length; None for null, which only a ``nullable`` field may hold."""
    n = read_length(stream, compact, True)
    if n < 0:
        if nullable and n == -1:
            return None
        raise DecodeError(f"invalid bytes length {n}")
    return n


def read_bytes(stream: io.BytesIO, compact: bool, nullable: bool) -> bytes | None:
    """Raw bytes; null only where ``nullable``."""
    n = _bytes_length(stream, compact, nullable)
    return None if n is None else take(stream, n)


def read_records(stream: io.BytesIO, compact: bool, nullable: bool) -> bytes | memoryview | None:
    """A records field: as ``read_bytes``, but a view rather than a copy when ``stream`` is a ViewReader."""
    n = _bytes_length(stream, compact, nullable)
    if n is None:
        return None
    if type(stream) is not ViewReader:
        return take(stream, n)
    if n > remaining(stream):
        raise DecodeError(f"length {n} exceeds the {remaining(stream)} bytes remaining")
    return stream.read_view(n)


def write_bytes(stream: io.BytesIO, value: Any, compact: bool, nullable: bool) -> None:
    """Write bytes, bytearray or a memoryview; None as null (EncodeError if not ``nullable``)."""
    if value is None:
        if not nullable:
            raise EncodeError("null in non-nullable bytes")
        write_length(stream, -1, compact, True)
        return
    n = value.nbytes if isinstance(value, memoryview) else len(value)
    write_length(stream, n, compact, True)
    stream.write(value)


def read_count(stream: io.BytesIO, compact: bool, nullable: bool, min_size: int) -> int:
    """Array element count (-1 = null); the count times ``min_size`` must fit in the bytes remaining, and the count
    within the stream's element budget (``elements_left``), which it uses up."""
    n = read_length(stream, compact, True)
    if n < 0:
        if nullable and n == -1:
            return -1
        raise DecodeError(f"invalid array length {n}")
    if n * min_size > remaining(stream):
        raise DecodeError(f"array of {n} elements exceeds the {remaining(stream)} bytes remaining")
    left = getattr(stream, "elements_left", None)
    if left is not None:
        if n > left:
            raise DecodeError(f"array of {n} elements exceeds the message's budget of elements ({left} left)")
        stream.elements_left = left - n  # type: ignore[attr-defined]
    return n


def read_uuid(stream: io.BytesIO) -> uuid.UUID:
    """16-byte UUID."""
    return uuid.UUID(bytes=take_exact(stream, 16))


def write_uuid(stream: io.BytesIO, value: uuid.UUID | bytes) -> None:
    """Write a UUID given as uuid.UUID or 16 raw bytes."""
    raw = value.bytes if isinstance(value, uuid.UUID) else bytes(value)
    if len(raw) != 16:
        raise EncodeError("a UUID is 16 bytes")
    stream.write(raw)


def read_bool(stream: io.BytesIO) -> bool:
    """One byte, non-zero is true."""
    return take_exact(stream, 1)[0] != 0


def write_bool(stream: io.BytesIO, value: bool) -> None:
    """One byte, 1 or 0."""
    stream.write(b"\x01" if value else b"\x00")


def read_fixed_array(stream: io.BytesIO, n: int, code: str, size: int) -> list[Any]:
    """``n`` fixed-size numbers in one unpack (bounds already checked by read_count)."""
    return list(struct.unpack(f">{n}{code}", take(stream, n * size)))


# --------------------------------------------------------------------------------------------------
# Tagged-field sections (KIP-482): count, then per field: tag, size, payload; tags strictly ascending.


def read_tagged(
    stream: io.BytesIO, known: dict[int, tuple[str, Callable[[io.BytesIO], Any]]], out: dict[str, Any]
) -> None:
    """Read a tagged-field section, storing known tags into ``out`` and skipping unknown ones."""
    count = read_uvarint(stream)
    if count > remaining(stream):
        raise DecodeError("tagged field count exceeds input")
    last = -1
    for _ in range(count):
        tag = read_uvarint(stream)
        if tag <= last:
            raise DecodeError("tagged fields out of order or duplicated")
        last = tag
        size = read_uvarint(stream)
        payload = take(stream, size)
        entry = known.get(tag)
        if entry is not None:
            sub = Reader(payload)
            out[entry[0]] = entry[1](sub)
            if sub.tell() != size:
                raise DecodeError(f"tagged field {tag} has {size - sub.tell()} trailing bytes")


def write_tagged(stream: io.BytesIO, fields: list[tuple[int, bytes]]) -> None:
    """Write a tagged-field section from (tag, payload) pairs sorted by tag."""
    stream.write(uvarint_bytes(len(fields)))
    for tag, payload in fields:
        stream.write(uvarint_bytes(tag))
        stream.write(uvarint_bytes(len(payload)))
        stream.write(payload)


def skip_tagged(stream: io.BytesIO) -> None:
    """Read and discard a tagged-field section."""
    read_tagged(stream, {}, {})


# --------------------------------------------------------------------------------------------------
# construct classes

_PREAMBLE = "from oncelog.protocol import primitives as _P\n"


class KafkaType(Construct):
    """Base of our construct classes: ``min_size`` bounds array counts; ``nullable`` allows None."""

    min_size = 1
    nullable = False

    def __init__(self) -> None:
        super().__init__()
        self.flagbuildnone = True

    def _sizeof(self, context: Any, path: str) -> int:
        from construct import SizeofError

        raise SizeofError(path=path)


class FixedInt(KafkaType):
    """A big-endian fixed-width number given by a ``struct`` code (b h i q H I d)."""

    def __init__(self, code: str) -> None:
        super().__init__()
        self.code = code
        self.fmt = struct.Struct(">" + code)
        self.min_size = self.fmt.size

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        return self.fmt.unpack(take_exact(stream, self.fmt.size))[0]

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        stream.write(self.fmt.pack(obj))
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_PREAMBLE)
        name = f"_S_{self.code}"
        code.append(f"{name} = struct.Struct('>{self.code}')\n")
        return f"{name}.unpack(_P.take_exact(io, {self.fmt.size}))[0]"

    def _emitbuild(self, code: Any) -> str:
        code.append(_PREAMBLE)
        name = f"_S_{self.code}"
        code.append(f"{name} = struct.Struct('>{self.code}')\n")
        return f"io.write({name}.pack(obj))"


class Bool(KafkaType):
    """Kafka boolean: one byte, non-zero is true."""

    def _parse(self, stream: Any, context: Any, path: str) -> bool:
        return read_bool(stream)

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        write_bool(stream, obj)
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_PREAMBLE)
        return "_P.read_bool(io)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_PREAMBLE)
        return "_P.write_bool(io, obj)"


class Uuid(KafkaType):
    """16-byte UUID, parsed to ``uuid.UUID``; builds from UUID or 16 bytes."""

    min_size = 16

    def _parse(self, stream: Any, context: Any, path: str) -> uuid.UUID:
        return read_uuid(stream)

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        write_uuid(stream, obj)
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_PREAMBLE)
        return "_P.read_uuid(io)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_PREAMBLE)
        return "_P.write_uuid(io, obj)"


class _VarNum(KafkaType):
    """Varint family; ``kind`` names the reader/writer pair."""

    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.reader = globals()[f"read_{kind}"]
        self.writer = globals()[f"write_{kind}"]

    def _parse(self, stream: Any, context: Any, path: str) -> int:
        return self.reader(stream)

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        self.writer(stream, obj)
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_PREAMBLE)
        return f"_P.read_{self.kind}(io)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_PREAMBLE)
        return f"_P.write_{self.kind}(io, obj)"


def write_uvarlong(stream: io.BytesIO, value: int) -> None:
    """Write an unsigned varlong."""
    stream.write(uvarint_bytes(value))


class String(KafkaType):
    """UTF-8 string with int16 length, or compact (uvarint length+1); optionally nullable."""

    def __init__(self, compact: bool = False, nullable: bool = False) -> None:
        super().__init__()
        self.compact = compact
        self.nullable = nullable
        self.min_size = 1 if compact else 2

    def _parse(self, stream: Any, context: Any, path: str) -> str | None:
        return read_string(stream, self.compact, self.nullable)

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        write_string(stream, obj, self.compact, self.nullable)
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_PREAMBLE)
        return f"_P.read_string(io, {self.compact}, {self.nullable})"

    def _emitbuild(self, code: Any) -> str:
        code.append(_PREAMBLE)
        return f"_P.write_string(io, obj, {self.compact}, {self.nullable})"


class Bytes(KafkaType):
    """Raw bytes with int32 length, or compact; optionally nullable. Also used for ``records``."""

    def __init__(self, compact: bool = False, nullable: bool = False) -> None:
        super().__init__()
        self.compact = compact
        self.nullable = nullable
        self.min_size = 1 if compact else 4

    def _parse(self, stream: Any, context: Any, path: str) -> bytes | None:
        return read_bytes(stream, self.compact, self.nullable)

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        write_bytes(stream, obj, self.compact, self.nullable)
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_PREAMBLE)
        return f"_P.read_bytes(io, {self.compact}, {self.nullable})"

    def _emitbuild(self, code: Any) -> str:
        code.append(_PREAMBLE)
        return f"_P.write_bytes(io, obj, {self.compact}, {self.nullable})"


class Records(Bytes):
    """A ``records`` field: bytes, or a view into the input when decoding from a ViewReader."""

    def _parse(self, stream: Any, context: Any, path: str) -> bytes | memoryview | None:
        return read_records(stream, self.compact, self.nullable)

    def _emitparse(self, code: Any) -> str:
        code.append(_PREAMBLE)
        return f"_P.read_records(io, {self.compact}, {self.nullable})"


class Array(KafkaType):
    """Array with int32 count (-1 = null) or compact count; elements parsed by ``element``."""

    def __init__(self, element: KafkaType, compact: bool = False, nullable: bool = False) -> None:
        super().__init__()
        self.element = element
        self.compact = compact
        self.nullable = nullable
        self.min_size = 1 if compact else 4

    def _parse(self, stream: Any, context: Any, path: str) -> list[Any] | None:
        n = read_count(stream, self.compact, self.nullable, self.element.min_size)
        if n < 0:
            return None
        el = self.element
        return [el._parse(stream, context, path) for _ in range(n)]

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        if obj is None:
            if not self.nullable:
                raise EncodeError("null in a non-nullable array")
            write_length(stream, -1, self.compact, True)
            return obj
        write_length(stream, len(obj), self.compact, True)
        el = self.element
        for item in obj:
            el._build(item, stream, context, path)
        return obj

    def _emitparse(self, code: Any) -> str:
        code.append(_PREAMBLE)
        fname = f"parse_karray_{code.allocateId()}"
        el = self.element
        if isinstance(el, FixedInt):
            body = f"_P.read_fixed_array(io, n, '{el.code}', {el.fmt.size})"
        else:
            body = f"[{el._compileparse(code)} for _ in range(n)]"
        code.append(f"""
def {fname}(io, this):
    n = _P.read_count(io, {self.compact}, {self.nullable}, {el.min_size})
    if n < 0:
        return None
    return {body}
""")
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_PREAMBLE)
        fname = f"build_karray_{code.allocateId()}"
        el = self.element
        code.append(f"""
def {fname}(items, io, this):
    if items is None:
        if not {self.nullable}:
            raise _P.EncodeError('null in a non-nullable array')
        _P.write_length(io, -1, {self.compact}, True)
        return None
    _P.write_length(io, len(items), {self.compact}, True)
    for obj in items:
        {el._compilebuild(code)}
    return items
""")
        return f"{fname}(obj, io, this)"


# --------------------------------------------------------------------------------------------------
# Struct with version-agnostic defaults and a tagged-field section


def same(a: Any, b: Any) -> bool:
    """Equality that compares two mappings as plain dicts (construct's Container.__eq__ is slow)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return dict.__eq__(a, b) is True
    return bool(a == b)


def _is_literal(value: Any) -> bool:
    return value is None or type(value) in (int, str, bool, bytes, float)


class Default:
    """A field default: a literal, or a factory called for a fresh value (lists, structs, UUIDs)."""

    __slots__ = ("_cmp", "factory", "value")

    def __init__(self, value: Any = None, factory: Callable[[], Any] | None = None) -> None:
        self.value = value
        self.factory = factory
        self._cmp: Any = _MISSING

    @property
    def cmp(self) -> Any:
        """A shared default value for equality tests only (never handed out)."""
        if self._cmp is _MISSING:
            self._cmp = self.make()
        return self._cmp

    def make(self) -> Any:
        """A fresh default value."""
        return self.factory() if self.factory is not None else self.value

    def emit(self, code: Any, shared: bool = False) -> str:
        """Source expression for a fresh default (``shared``: the comparison value) in generated code."""
        if self.factory is None and _is_literal(self.value):
            return repr(self.value)
        key = id(self)
        code.linkedinstances[key] = self
        return f"linkedinstances[{key}].cmp" if shared else f"linkedinstances[{key}].make()"


class StructField:
    """A field of a :class:`KStruct` at one version.

    ``default`` fills the field on decode when absent; ``build_default`` replaces a missing value (or None
    where the field is not nullable) on encode. ``tag`` is set for tagged fields.
    """

    __slots__ = ("build_default", "default", "name", "subcon", "tag")

    def __init__(
        self, name: str, subcon: KafkaType | None, default: Default, build_default: Default, tag: int | None = None
    ) -> None:
        self.name = name
        self.subcon = subcon
        self.default = default
        self.build_default = build_default
        self.tag = tag


class KStruct(KafkaType):
    """A Kafka struct at one version: regular fields in order, then (if flexible) a tagged-field section.

    Parses into a construct ``Container`` holding every field the message knows at ANY version: fields the
    version lacks get their defaults. Builds from any mapping whose keys are fields the message knows at some
    version (``known``): a key it knows at no version raises :class:`EncodeError` (a misspelt field never goes
    out as its default); fields this version lacks are left out, missing keys take defaults. Tagged fields are
    written only when they differ from their default.
    """

    def __init__(
        self, fields: list[StructField], absent: list[StructField], tagged: list[StructField], flexible: bool
    ) -> None:
        super().__init__()
        self.fields = fields
        self.absent = absent
        self.tagged = sorted(tagged, key=lambda f: f.tag or 0)
        self.flexible = flexible
        self.min_size = max(1, sum(f.subcon.min_size for f in fields if f.subcon) + (1 if flexible else 0))
        self.known = frozenset(f.name for f in (*fields, *absent, *tagged))

    # -- interpreted
    def _parse(self, stream: Any, context: Any, path: str) -> Container:
        result = Container()
        for f in self.fields:
            result[f.name] = f.subcon._parse(stream, context, path)
        for f in self.absent:
            result[f.name] = f.default.make()
        if self.flexible:
            known = {f.tag: (f.name, _bind_parser(f.subcon, context, path)) for f in self.tagged}
            read_tagged(stream, known, result)
            for f in self.tagged:
                if f.name not in result:
                    result[f.name] = f.default.make()
        return result

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        if obj is None:
            obj = {}
        elif not self.known.issuperset(obj):
            refuse_unknown(obj, self.known)
        for f in self.fields:
            value = obj.get(f.name, _MISSING)
            if value is _MISSING or (value is None and not f.subcon.nullable):
                value = f.build_default.make()
            f.subcon._build(value, stream, context, path)
        if self.flexible:
            pending = []
            for f in self.tagged:
                value = obj.get(f.name, _MISSING)
                if value is _MISSING or same(value, f.default.cmp):
                    continue
                sub = io.BytesIO()
                f.subcon._build(value, sub, context, path)
                pending.append((f.tag, sub.getvalue()))
            write_tagged(stream, pending)
        return obj

    # -- compiled
    def _emitparse(self, code: Any) -> str:
        code.append(_PREAMBLE)
        uid = code.allocateId()
        fname = f"parse_kstruct_{uid}"
        lines = [f"def {fname}(io, this):", "    r = Container()"]
        for group in _group_fixed(self.fields):
            if isinstance(group, list):
                fmt = ">" + "".join(f.subcon.code for f in group)
                sname = f"_S_{fmt[1:]}"
                size = struct.calcsize(fmt)
                code.append(f"{sname} = struct.Struct('{fmt}')\n")
                names = ", ".join(f"r[{f.name!r}]" for f in group)
                lines.append(f"    {names}, = {sname}.unpack(_P.take_exact(io, {size}))")
            else:
                lines.append(f"    r[{group.name!r}] = {group.subcon._compileparse(code)}")
        for f in self.absent:
            lines.append(f"    r[{f.name!r}] = {f.default.emit(code)}")
        if self.flexible:
            entries = []
            for f in self.tagged:
                tname = f"parse_tag_{uid}_{f.tag}"
                code.append(f"def {tname}(io, this=None):\n    return {f.subcon._compileparse(code)}\n")
                entries.append(f"{f.tag}: ({f.name!r}, {tname})")
            tbl = f"_TAGS_{uid}"
            code.append(f"{tbl} = {{{', '.join(entries)}}}\n")
            lines.append(f"    _P.read_tagged(io, {tbl}, r)")
            for f in self.tagged:
                lines.append(f"    if {f.name!r} not in r:")
                lines.append(f"        r[{f.name!r}] = {f.default.emit(code)}")
        lines.append("    return r")
        code.append("\n".join(lines) + "\n")
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_PREAMBLE)
        uid = code.allocateId()
        fname = f"build_kstruct_{uid}"
        known = f"_KNOWN_{uid}"
        # Bound once: the check costs one call per struct (about 10 ns per key), no attribute lookup.
        code.append(f"{known} = frozenset({sorted(self.known)!r})\n{known}_has_all = {known}.issuperset\n")
        lines = [
            f"def {fname}(objdict, io, this):",
            "    if objdict is None:",
            "        objdict = {}",
            f"    elif not {known}_has_all(objdict):",
            f"        _P.refuse_unknown(objdict, {known})",
            "    get = objdict.get",
        ]
        for f in self.fields:
            if f.subcon.nullable:
                lines.append(f"    obj = get({f.name!r}, _P._MISSING)")
                lines.append("    if obj is _P._MISSING:")
            else:
                lines.append(f"    obj = get({f.name!r})")
                lines.append("    if obj is None:")
            lines.append(f"        obj = {f.build_default.emit(code)}")
            lines.append(f"    {f.subcon._compilebuild(code)}")
        if self.flexible:
            if not self.tagged:
                lines.append("    io.write(b'\\x00')")
            else:
                lines.append("    pending = []")
                for f in self.tagged:
                    bname = f"build_tag_{uid}_{f.tag}"
                    code.append(
                        f"def {bname}(obj, this):\n    io = BytesIO()\n"
                        f"    {f.subcon._compilebuild(code)}\n    return io.getvalue()\n"
                    )
                    lines.append(f"    obj = get({f.name!r}, _P._MISSING)")
                    cmp = f.default.emit(code, shared=True)
                    lines.append(f"    if obj is not _P._MISSING and not _P.same(obj, {cmp}):")
                    lines.append(f"        pending.append(({f.tag}, {bname}(obj, this)))")
                lines.append("    _P.write_tagged(io, pending)")
        lines.append("    return objdict")
        code.append("\n".join(lines) + "\n")
        return f"{fname}(obj, io, this)"


class NullableStruct(KafkaType):
    """A struct that may be null (e.g. KIP-848's Assignment): an int8 marker, -1 for null or 1, then the struct."""

    nullable = True

    def __init__(self, struct: KStruct) -> None:
        super().__init__()
        self.struct = struct

    def _parse(self, stream: Any, context: Any, path: str) -> Any:
        if Int8._parse(stream, context, path) < 0:
            return None
        return self.struct._parse(stream, context, path)

    def _build(self, obj: Any, stream: Any, context: Any, path: str) -> Any:
        if obj is None:
            stream.write(b"\xff")
            return None
        stream.write(b"\x01")
        return self.struct._build(obj, stream, context, path)

    def _emitparse(self, code: Any) -> str:
        code.append(_PREAMBLE)
        fname = f"parse_knullstruct_{code.allocateId()}"
        code.append(f"""
def {fname}(io, this):
    if _P.take_exact(io, 1) == b'\\xff':
        return None
    return {self.struct._compileparse(code)}
""")
        return f"{fname}(io, this)"

    def _emitbuild(self, code: Any) -> str:
        code.append(_PREAMBLE)
        fname = f"build_knullstruct_{code.allocateId()}"
        code.append(f"""
def {fname}(obj, io, this):
    if obj is None:
        io.write(b'\\xff')
        return None
    io.write(b'\\x01')
    {self.struct._compilebuild(code)}
    return obj
""")
        return f"{fname}(obj, io, this)"


def refuse_unknown(obj: Any, known: frozenset[str]) -> None:
    """Raise EncodeError naming the keys of ``obj`` that are not in ``known`` (the struct's fields at any version)."""
    unknown = sorted(str(k) for k in obj if k not in known)
    raise EncodeError(f"field(s) not in schema: {', '.join(unknown)} (known: {', '.join(sorted(known))})")


def _bind_parser(subcon: KafkaType, context: Any, path: str) -> Callable[[io.BytesIO], Any]:
    return lambda stream: subcon._parse(stream, context, path)


def _group_fixed(fields: list[StructField]) -> list[Any]:
    """Runs of consecutive FixedInt fields (as lists) and single other fields, in order."""
    out: list[Any] = []
    run: list[StructField] = []
    for f in fields:
        if isinstance(f.subcon, FixedInt):
            run.append(f)
            continue
        if run:
            out.append(run)
            run = []
        out.append(f)
    if run:
        out.append(run)
    return out


# Singletons for the fixed-size types.
Int8 = FixedInt("b")
Int16 = FixedInt("h")
Int32 = FixedInt("i")
Int64 = FixedInt("q")
UInt16 = FixedInt("H")
UInt32 = FixedInt("I")
Float64 = FixedInt("d")
Boolean = Bool()
UUID = Uuid()
UnsignedVarInt = _VarNum("uvarint")
VarInt = _VarNum("varint")
VarLong = _VarNum("varlong")
