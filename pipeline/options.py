"""Options of format("oncelog"), named like Spark's Kafka integration, parsed once into :class:`SourceOptions`
and :class:`SinkOptions`.

Guarantees: option names are case-insensitive (Spark lower-cases them); a missing or contradictory option raises
ValueError naming it; no I/O happens here.
"""

from __future__ import annotations

import hashlib
import json
import os
import uuid
from collections.abc import Mapping
from dataclasses import dataclass

BOOTSTRAP = "kafka.bootstrap.servers"
ISOLATION = "kafka.isolation.level"
DEFAULT_ISOLATION = "read_committed"  # Spark's Kafka source reads read_uncommitted; oncelog defaults to committed
TXN_TIMEOUT = "kafka.transaction.timeout.ms"
DEFAULT_TXN_TIMEOUT_MS = 60000  # transaction.timeout.ms, Kafka default 60000
MARKER_TOPIC = "oncelog.markers.topic"
DEFAULT_MARKER_TOPIC = "oncelog-spark-markers"
QUERY_ID = "oncelog.query.id"
READ_TIMEOUT = "oncelog.read.timeout.ms"
DEFAULT_READ_TIMEOUT_MS = 120000  # a range that makes no progress this long fails the task
#: Producer settings a write accepts as kafka.<name> options (as Spark's Kafka sink passes kafka.* through).
PRODUCER_OPTIONS = {
    "linger.ms": int,
    "batch.size": int,
    "compression.type": str,
    "request.timeout.ms": int,
    "delivery.timeout.ms": int,
}


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in options.items()}


def _bootstrap(opts: Mapping[str, str]) -> str:
    value = opts.get(BOOTSTRAP)
    if not value:
        raise ValueError(f"option {BOOTSTRAP} is required")
    return value


@dataclass(frozen=True)
class SourceOptions:
    """What to read: topics (subscribe / subscribePattern) or partitions (assign), offsets, isolation, limits."""

    bootstrap: str
    subscribe: tuple[str, ...] = ()
    pattern: str | None = None
    assign: tuple[tuple[str, int], ...] = ()
    starting: str = "earliest"  # "earliest" | "latest" | JSON {topic: {partition: offset}}
    ending: str = "latest"
    isolation: str = DEFAULT_ISOLATION
    max_offsets_per_trigger: int | None = None
    read_timeout_ms: int = DEFAULT_READ_TIMEOUT_MS

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SourceOptions:
        opts = _lower(options)
        chosen = [k for k in ("subscribe", "subscribepattern", "assign") if opts.get(k)]
        if len(chosen) != 1:
            raise ValueError("exactly one of the options subscribe, subscribePattern, assign is required")
        assign: tuple[tuple[str, int], ...] = ()
        if "assign" in chosen:
            spec = json.loads(opts["assign"])
            assign = tuple(sorted((t, int(p)) for t, ps in spec.items() for p in ps))
        isolation = opts.get(ISOLATION, DEFAULT_ISOLATION)
        if isolation not in ("read_committed", "read_uncommitted"):
            raise ValueError(f"{ISOLATION} must be read_committed or read_uncommitted; got {isolation!r}")
        ending = opts.get("endingoffsets", "latest")
        if streaming and "endingoffsets" in opts:
            raise ValueError("endingOffsets is for batch queries only")
        starting = opts.get("startingoffsets", "latest" if streaming else "earliest")
        if starting == "latest" and not streaming:
            raise ValueError("startingOffsets=latest is not valid for batch queries")
        if ending == "earliest":
            raise ValueError("endingOffsets=earliest is not valid")
        max_offsets = opts.get("maxoffsetspertrigger")
        if max_offsets is not None and int(max_offsets) <= 0:
            raise ValueError("maxOffsetsPerTrigger must be positive")
        return cls(
            bootstrap=_bootstrap(opts),
            subscribe=tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip()),
            pattern=opts.get("subscribepattern") or None,
            assign=assign,
            starting=starting,
            ending=ending,
            isolation=isolation,
            max_offsets_per_trigger=int(max_offsets) if max_offsets is not None else None,
            read_timeout_ms=int(opts.get(READ_TIMEOUT, DEFAULT_READ_TIMEOUT_MS)),
        )


def _query_key(opts: Mapping[str, str], *, streaming: bool) -> str:
    """The stable identity of a write: oncelog.query.id, else (streaming) a hash of the checkpoint location --
    the same on every restart of the query; a batch write without oncelog.query.id gets a fresh uuid."""
    if opts.get(QUERY_ID):
        return opts[QUERY_ID]
    checkpoint = opts.get("checkpointlocation")
    if streaming and checkpoint:
        path = os.path.abspath(checkpoint.removeprefix("file:"))
        return hashlib.sha256(path.encode()).hexdigest()[:32]
    return str(uuid.uuid4())


@dataclass(frozen=True)
class SinkOptions:
    """Where and how to write: default topic (or a ``topic`` column), the query identity for exactly-once."""

    bootstrap: str
    topic: str | None
    query_id: str
    transaction_timeout_ms: int = DEFAULT_TXN_TIMEOUT_MS
    marker_topic: str = DEFAULT_MARKER_TOPIC
    producer_config: tuple[tuple[str, str | int], ...] = ()

    @classmethod
    def parse(cls, options: Mapping[str, str], *, streaming: bool) -> SinkOptions:
        opts = _lower(options)
        producer: dict[str, str | int] = {}
        for name, kind in PRODUCER_OPTIONS.items():
            if f"kafka.{name}" in opts:
                producer[name.replace(".", "_")] = kind(opts[f"kafka.{name}"])
        return cls(
            bootstrap=_bootstrap(opts),
            topic=opts.get("topic") or None,
            query_id=_query_key(opts, streaming=streaming),
            transaction_timeout_ms=int(opts.get(TXN_TIMEOUT, DEFAULT_TXN_TIMEOUT_MS)),
            marker_topic=opts.get(MARKER_TOPIC, DEFAULT_MARKER_TOPIC),
            producer_config=tuple(sorted(producer.items())),
        )

    @property
    def transactional_id_prefix(self) -> str:
        return f"oncelog-spark-{self.query_id}-"

    def transactional_id(self, partition_id: int) -> str:
        """One transactional.id per (query, Spark partition): a retried or zombie attempt of the task is fenced."""
        return f"{self.transactional_id_prefix}{partition_id}"

    def marker_group(self, partition_id: int) -> str:
        """The consumer group holding the progress marker of (query, Spark partition)."""
        return f"oncelog-spark-{self.query_id}-p{partition_id}"
