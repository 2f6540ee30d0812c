"""Deterministic record sets for interop tests, the Java murmur2 partitioner, and a field-by-field checker.

Guaranteed: ``make_records(n, seed)`` always yields the same records for the same arguments; they mix keyed
and null-key records, null / empty / binary values, 0-3 headers (repeated names, empty and, optionally, null
header values) and distinct explicit CreateTime timestamps.
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")


@dataclass(frozen=True)
class SampleRecord:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int


@dataclass(frozen=True)
class Delivered:
    """Where the producer was told a record landed."""

    index: int
    partition: int
    offset: int


@dataclass(frozen=True)
class Consumed:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int


def make_records(
    n: int,
    seed: int = 1,
    *,
    null_keys: bool = True,
    null_header_values: bool = True,
    null_key_and_value: bool = True,
) -> list[SampleRecord]:
    """``n`` varied records; timestamps are distinct, within the last hour, increasing with the index.
    ``null_key_and_value=False`` gives records with a null key a non-null value (aiokafka refuses both)."""
    rng = random.Random(seed)
    base_ts = int(time.time() * 1000) - 3_600_000
    records = []
    for i in range(n):
        roll = rng.random()
        if null_keys and roll < 0.02:
            key = None
        elif roll < 0.5:
            key = f"key-{rng.randrange(200)}".encode()
        else:
            key = rng.randbytes(rng.randrange(1, 40))
        vroll = rng.random()
        if vroll < 0.05:
            value = None
        elif vroll < 0.07:
            value = b""
        else:
            value = rng.randbytes(rng.randrange(1, 300))
        if key is None and value is None and not null_key_and_value:
            value = b"\x00null-key"
        headers = []
        for _ in range(rng.randrange(4)):
            name = rng.choice(("trace", "h\u00e9ader", "content-type", "trace"))
            hroll = rng.random()
            if null_header_values and hroll < 0.1:
                hv = None
            elif hroll < 0.2:
                hv = b""
            else:
                hv = rng.randbytes(rng.randrange(1, 24))
            headers.append((name, hv))
        records.append(SampleRecord(key, value, tuple(headers), base_ts + i * 3 + rng.randrange(3)))
    return records


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (seed 0x9747b28c) as a signed 32-bit int."""
    m = 0x5BD1E995
    r = 24
    mask = 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    whole = length - (length & 3)
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def java_partition(key: bytes, num_partitions: int) -> int:
    """The Java default partitioner's choice for a non-null key: ``toPositive(murmur2(key)) % n``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


@dataclass
class CheckReport:
    problems: list[str] = field(default_factory=list)

    def add(self, msg: str) -> None:
        if len(self.problems) < 30:
            self.problems.append(msg)

    def raise_if_any(self) -> None:
        if self.problems:
            raise AssertionError("record mismatch:\n  " + "\n  ".join(self.problems))


def check_roundtrip(
    records: Sequence[SampleRecord],
    delivered: Iterable[Delivered],
    consumed: Iterable[Consumed],
    *,
    num_partitions: int,
    murmur2_partitioning: bool = True,
    null_header_equals_empty: bool = False,
) -> None:
    """Assert every produced record was consumed at its reported (partition, offset) with every field equal,
    each partition's offsets run 0..n-1 without gaps or duplicates, and keyed records sit on the Java
    murmur2 partition (when ``murmur2_partitioning``)."""
    rep = CheckReport()
    delivered = list(delivered)
    consumed = list(consumed)
    if len(delivered) != len(records):
        rep.add(f"{len(delivered)} delivery reports for {len(records)} records")
    by_pos: dict[tuple[int, int], Consumed] = {}
    for c in consumed:
        if (c.partition, c.offset) in by_pos:
            rep.add(f"offset {c.offset} of partition {c.partition} consumed twice")
        by_pos[(c.partition, c.offset)] = c
    if len(by_pos) != len(records):
        rep.add(f"consumed {len(by_pos)} distinct records, produced {len(records)}")
    offsets: dict[int, list[int]] = defaultdict(list)
    for d in delivered:
        rec = records[d.index]
        offsets[d.partition].append(d.offset)
        if murmur2_partitioning and rec.key is not None:
            want = java_partition(rec.key, num_partitions)
            if d.partition != want:
                rep.add(f"record {d.index} key {rec.key!r} on partition {d.partition}, murmur2 says {want}")
        c = by_pos.get((d.partition, d.offset))
        if c is None:
            rep.add(f"record {d.index} acknowledged at {d.partition}/{d.offset} but not consumed")
            continue
        want_headers = rec.headers
        if null_header_equals_empty:
            want_headers = tuple((k, b"" if v is None else v) for k, v in want_headers)
        for name, got, want in (
            ("key", c.key, rec.key),
            ("value", c.value, rec.value),
            ("headers", c.headers, want_headers),
            ("timestamp", c.timestamp_ms, rec.timestamp_ms),
        ):
            if got != want:
                rep.add(f"record {d.index} at {d.partition}/{d.offset}: {name} {got!r:.80} != {want!r:.80}")
    for p, offs in offsets.items():
        if sorted(offs) != list(range(len(offs))):
            rep.add(f"partition {p} offsets not contiguous from 0: {sorted(offs)[:10]}...")
    rep.raise_if_any()
