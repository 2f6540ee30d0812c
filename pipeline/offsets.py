"""Offset bookkeeping for the Spark source: partition discovery, earliest / latest (LSO) lookups, and the
deterministic JSON form of a position ``{topic: {partition: offset}}``.

Guarantees: :func:`to_json` orders topics and partitions, so equal positions give equal JSON; with
read_committed, "latest" is the last stable offset, so a range that ends there never includes an open
transaction; a JSON spec's -2 means earliest and -1 latest (Spark's convention).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass

import anyio
from oncelog.client import Admin, Consumer, TopicPartition
from oncelog.pipeline.options import SourceOptions

EARLIEST = -2  # ListOffsets timestamp / spec value for the log start offset
LATEST = -1  # ListOffsets timestamp / spec value for the high watermark (the LSO with read_committed)

Offsets = dict[TopicPartition, int]
JsonOffsets = dict[str, dict[str, int]]


@dataclass(frozen=True)
class OffsetRange:
    """One Spark input partition: a topic-partition and [start, end)."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


def to_json(offsets: Mapping[TopicPartition, int]) -> JsonOffsets:
    """``{tp: offset}`` -> ``{topic: {"partition": offset}}`` with sorted keys (partitions numerically)."""
    out: JsonOffsets = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = int(offsets[tp])
    return out


def from_json(offsets: Mapping[str, Mapping[str, int]]) -> Offsets:
    """The inverse of :func:`to_json`."""
    return {TopicPartition(t, int(p)): int(o) for t, ps in offsets.items() for p, o in ps.items()}


@dataclass(frozen=True)
class Snapshot:
    """Every partition's earliest and latest offset at one moment."""

    earliest: Offsets
    latest: Offsets

    def resolve(self, spec: str) -> Offsets:
        """A startingOffsets/endingOffsets value -> an offset per partition (partitions missing from a JSON
        spec are not included)."""
        if spec == "earliest":
            return dict(self.earliest)
        if spec == "latest":
            return dict(self.latest)
        out: Offsets = {}
        for tp, value in from_json(json.loads(spec)).items():
            if tp not in self.latest:
                raise ValueError(f"{tp.topic}-{tp.partition} in the offsets {spec!r} does not exist")
            out[tp] = self.earliest[tp] if value == EARLIEST else self.latest[tp] if value == LATEST else value
        return out


async def _partitions(consumer: Consumer, opts: SourceOptions) -> list[TopicPartition]:
    if opts.assign:
        return [TopicPartition(t, p) for t, p in opts.assign]
    topics = list(opts.subscribe)
    if opts.pattern is not None:
        async with Admin(opts.bootstrap) as admin:
            names = await admin.list_topics()
        regex = re.compile(opts.pattern)
        topics = sorted(t for t in names if regex.fullmatch(t))
    out: list[TopicPartition] = []
    for topic in topics:
        out.extend(await consumer.partitions_for_topic(topic))
    return sorted(out)


async def _snapshot(opts: SourceOptions) -> Snapshot:
    async with Consumer(opts.bootstrap, isolation_level=opts.isolation, client_id="oncelog-spark-driver") as c:
        tps = await _partitions(c, opts)
        if not tps:
            return Snapshot({}, {})
        earliest = await c.list_offsets(tps, EARLIEST)
        latest = await c.list_offsets(tps, LATEST)
    return Snapshot(earliest, latest)


def snapshot(opts: SourceOptions) -> Snapshot:
    """Discover the partitions ``opts`` selects and their earliest and latest offsets (blocking)."""
    return anyio.run(_snapshot, opts)


def limit_rows(start: Offsets, latest: Offsets, max_rows: int) -> Offsets:
    """The end position after at most ``max_rows`` offsets, shared among partitions in proportion to what each
    has available (deterministic: remainders go to partitions in sorted order)."""
    avail = {tp: max(0, latest[tp] - start.get(tp, latest[tp])) for tp in latest}
    total = sum(avail.values())
    if total <= max_rows:
        return dict(latest)
    share = {tp: n * max_rows // total for tp, n in avail.items()}
    left = max_rows - sum(share.values())
    for tp in sorted(avail):
        if left <= 0:
            break
        if share[tp] < avail[tp]:
            share[tp] += 1
            left -= 1
    return {tp: start.get(tp, latest[tp]) + share[tp] for tp in latest}
