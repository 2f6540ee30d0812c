"""Declarative message schemas (mirroring Kafka's JSON message specs) and their per-version constructs.

A :class:`Message` lists :class:`Field` s with version ranges, nullable/tagged ranges and defaults. From it
ONE :class:`~oncelog.protocol.primitives.KStruct` per version is built and compiled lazily on first use,
then cached. Flexible versions (KIP-482) are handled here once: from the message's first flexible version,
strings/bytes/arrays use compact encodings and every struct ends with a tagged-field section.
"""

from __future__ import annotations

import functools
import uuid
from dataclasses import dataclass, field
from typing import Any

from construct import Container
from oncelog.protocol import primitives as p

_UNSET: Any = object()


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; ``Versions.parse("3+")``, ``"1-4"``, ``"2"`` or ``"none"``."""

    low: int
    high: int

    @staticmethod
    @functools.cache  # few distinct specs; parsed on every request's schema lookup
    def parse(spec: str) -> Versions:
        """Parse Kafka's version-range notation."""
        spec = spec.strip()
        if spec == "none":
            return Versions(1, 0)
        if spec.endswith("+"):
            return Versions(int(spec[:-1]), 0x7FFF)
        if "-" in spec:
            lo, hi = spec.split("-")
            return Versions(int(lo), int(hi))
        return Versions(int(spec), int(spec))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.low <= version <= self.high

    @property
    def empty(self) -> bool:
        """True for "none"."""
        return self.low > self.high


_FIXED = {
    "int8": p.Int8,
    "int16": p.Int16,
    "int32": p.Int32,
    "int64": p.Int64,
    "uint16": p.UInt16,
    "uint32": p.UInt32,
    "float64": p.Float64,
}
_ZERO = {
    "int8": 0,
    "int16": 0,
    "int32": 0,
    "int64": 0,
    "uint16": 0,
    "uint32": 0,
    "float64": 0.0,
    "bool": False,
    "string": "",
    "bytes": b"",
    "records": None,
}
_ZERO_UUID = uuid.UUID(int=0)


@dataclass(frozen=True)
class Field:
    """One field of a message or nested struct, as in Kafka's JSON specs (names already snake_case).

    ``type``: a primitive name (int8..int64, uint16, uint32, float64, bool, string, bytes, records, uuid),
    ``"[]<primitive>"`` for an array of primitives, ``"[]"`` for an array of structs (``children``), or
    ``"struct"`` for a nested struct. ``nullable``/``tagged`` are version ranges; ``default`` a Python value.
    ``flexible="none"`` keeps the classic encoding even in flexible versions (the header's client_id).
    """

    name: str
    type: str
    versions: str = "0+"
    children: tuple[Field, ...] = ()
    nullable: str = "none"
    tag: int | None = None
    tagged: str = "none"
    default: Any = _UNSET
    flexible: str | None = None

    @property
    def is_array(self) -> bool:
        """True for array types."""
        return self.type.startswith("[]")

    def nullable_somewhere(self) -> bool:
        """Nullable in at least one version."""
        return not Versions.parse(self.nullable).empty

    def default_value(self) -> p.Default:
        """The decode default: explicit, else zero / "" / None (nullable) / [] / a default struct."""
        if self.default is not _UNSET:
            return p.Default(self.default)
        if self.is_array:
            return p.Default(factory=list)
        if self.type == "struct":
            defaults = [(c.name, c.default_value()) for c in self.children]
            return p.Default(factory=lambda: Container([(n, d.make()) for n, d in defaults]))
        if self.type == "uuid":
            return p.Default(_ZERO_UUID)
        if self.nullable_somewhere() and self.type in ("string", "bytes", "records"):
            return p.Default(None)
        return p.Default(_ZERO[self.type])

    def build_default(self, version: int) -> p.Default:
        """The encode default at ``version``: the decode default, or a non-null zero if not nullable there."""
        d = self.default_value()
        if version in Versions.parse(self.nullable) or d.factory is not None or d.value is not None:
            return d
        if self.type == "records":
            return p.Default(b"")
        if self.type == "struct":
            return p.Default(factory=Container)
        return p.Default(_ZERO[self.type])


def F(name: str, type: str, versions: str = "0+", *children: Field, **kw: Any) -> Field:
    """Shorthand constructor: ``F("topics", "[]", "0+", F(...), F(...), nullable="1+")``."""
    return Field(name, type, versions, tuple(children), **kw)


def _subcon(f: Field, version: int, flexible: bool) -> p.KafkaType:
    if f.flexible is not None:
        flexible = flexible and version in Versions.parse(f.flexible)
    nullable = version in Versions.parse(f.nullable)
    t = f.type
    if t == "[]":
        return p.Array(build_struct(f.children, version, flexible), flexible, nullable)
    if t.startswith("[]"):
        return p.Array(_primitive(t[2:], flexible, False), flexible, nullable)
    if t == "struct" and nullable:
        return p.NullableStruct(build_struct(f.children, version, flexible))
    if t == "struct":
        return build_struct(f.children, version, flexible)
    return _primitive(t, flexible, nullable)


def _primitive(t: str, flexible: bool, nullable: bool) -> p.KafkaType:
    if t in _FIXED:
        return _FIXED[t]
    if t == "bool":
        return p.Boolean
    if t == "uuid":
        return p.UUID
    if t == "string":
        return p.String(flexible, nullable)
    if t == "bytes":
        return p.Bytes(flexible, nullable)
    if t == "records":
        return p.Records(flexible, nullable)
    raise ValueError(f"unknown field type {t!r}")


def build_struct(fields: tuple[Field, ...], version: int, flexible: bool) -> p.KStruct:
    """The KStruct for ``fields`` at ``version``."""
    regular: list[p.StructField] = []
    absent: list[p.StructField] = []
    tagged: list[p.StructField] = []
    for f in fields:
        present = version in Versions.parse(f.versions)
        is_tagged = present and f.tag is not None and version in Versions.parse(f.tagged)
        if is_tagged and not flexible:
            raise ValueError(f"tagged field {f.name} in a non-flexible version {version}")
        if not present:
            absent.append(p.StructField(f.name, None, f.default_value(), f.default_value()))
            continue
        sf = p.StructField(
            f.name,
            _subcon(f, version, flexible or is_tagged),
            f.default_value(),
            f.build_default(version),
            f.tag if is_tagged else None,
        )
        (tagged if is_tagged else regular).append(sf)
    return p.KStruct(regular, absent, tagged, flexible)


@dataclass
class Message:
    """One API's request or response schema across its versions."""

    name: str
    api_key: int
    valid: str
    flexible: str
    fields: tuple[Field, ...]
    _cache: dict[tuple[int, bool], Any] = field(default_factory=dict, repr=False, compare=False)

    def has_version(self, version: int) -> bool:
        """True when ``version`` is declared for this message."""
        return version in Versions.parse(self.valid)

    def is_flexible(self, version: int) -> bool:
        """True when ``version`` uses compact encodings and tagged fields (KIP-482)."""
        return version in Versions.parse(self.flexible)

    def construct(self, version: int, compiled: bool = True) -> Any:
        """The (compiled, cached) construct for ``version``; KeyError if the version is not declared."""
        key = (version, compiled)
        c = self._cache.get(key)
        if c is None:
            if not self.has_version(version):
                raise KeyError(f"{self.name} has no version {version}")
            c = build_struct(self.fields, version, self.is_flexible(version))
            if compiled:
                c = c.compile()
            self._cache[key] = c
        return c
