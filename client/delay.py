"""The delayed-delivery contract shared by producers and the DelayService: delay levels and record headers.

A delayed record is produced to a delay-level topic ``__delay-<level>`` (``__delay-5s``, ``__delay-1m``, ...) with
these headers, whose names and encodings are the contract (any Kafka client can schedule a record with them):

- ``oncelog-deliver-at-ms``: when to deliver, epoch milliseconds as ASCII decimal (required);
- ``oncelog-delay-target``: the topic to deliver to, UTF-8 (required);
- ``oncelog-delay-partition``: the target partition as ASCII decimal (optional; else a keyed record goes to its key's
  partition by Kafka's default partitioner, murmur2, and a keyless one to any);
- ``oncelog-delay-id``: an id the producer chose, UTF-8, by which a pending record can be cancelled (optional);
- ``oncelog-delay-timestamp-ms``: set by the DelayService when it moves a record to another level: the record's
  original timestamp (ASCII decimal), as the moved record's own timestamp is the time it entered that level (so a
  level topic's timestamps are append order and its retention works); a producer leaves it out.

A record produced to the longest level not longer than its delay (or the smallest, for a shorter delay) is
delivered within the smallest level's duration (plus a forward's time) after its due time, never before it (see
``broker/delay``). The delivered record keeps its key, value, original timestamp
and other headers; the headers above are removed.

``oncelog-ttl-ms`` (ASCII decimal milliseconds) is the time-to-live counted from the record's (original) timestamp;
the bundled consumer and the DelayService dead-letter (or drop) records past it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

DELIVER_AT_HEADER = "oncelog-deliver-at-ms"
TARGET_HEADER = "oncelog-delay-target"
PARTITION_HEADER = "oncelog-delay-partition"
DELAY_ID_HEADER = "oncelog-delay-id"
ORIGINAL_TIMESTAMP_HEADER = "oncelog-delay-timestamp-ms"
TTL_HEADER = "oncelog-ttl-ms"
#: Headers removed from a record when it is delivered to its target.
DELAY_HEADERS = frozenset(
    {DELIVER_AT_HEADER, TARGET_HEADER, PARTITION_HEADER, DELAY_ID_HEADER, ORIGINAL_TIMESTAMP_HEADER}
)
DELAY_TOPIC_PREFIX = "__delay-"
#: The compacted topic of cancellations: key = the ``oncelog-delay-id`` to cancel, value anything (a null value
#: withdraws a cancellation).
CANCEL_TOPIC = "__delay-cancel"
#: delay.levels default: the issue's twelve levels (RocketMQ's ladder from 5 s up) with 250ms, 500ms, 1s and 2s below
#: them. The smallest level bounds lateness: a record's last wait holds its partition's later records for less than
#: it. The doubling steps below 5 s take a delay of 1-5 s there in 2.5 level records on average (each move a
#: transaction), where 250ms,1s,5s took 4 (moves of 1 s, then of 250 ms).
DEFAULT_DELAY_LEVELS = "250ms,500ms,1s,2s,5s,10s,30s,1m,2m,5m,10m,20m,30m,45m,1h,2h"

_UNITS_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_LEVEL = re.compile(r"(\d+)(ms|s|m|h|d)")


@dataclass(frozen=True, order=True)
class DelayLevel:
    """One delay level: records in its topic wait ``ms`` after they entered it."""

    ms: int
    name: str

    @property
    def topic(self) -> str:
        return DELAY_TOPIC_PREFIX + self.name


def parse_levels(text: str | Iterable[str]) -> tuple[DelayLevel, ...]:
    """``"1s,5s,1m"`` (or its items) -> levels in ascending order; ValueError for an empty list, a malformed or
    non-positive duration, or two levels of one duration."""
    items = [item.strip() for item in (text.split(",") if isinstance(text, str) else text) if item.strip()]
    if not items:
        raise ValueError("delay.levels must name at least one level")
    levels = []
    for item in items:
        match = _LEVEL.fullmatch(item)
        if match is None or int(match.group(1)) <= 0:
            raise ValueError(f"delay level {item!r} is not a positive duration like 500ms, 5s, 1m, 2h or 1d")
        levels.append(DelayLevel(int(match.group(1)) * _UNITS_MS[match.group(2)], item))
    levels.sort()
    if len({level.ms for level in levels}) != len(levels):
        raise ValueError(f"delay.levels has two levels of the same duration: {text!r}")
    return tuple(levels)


def choose_level(levels: Sequence[DelayLevel], remaining_ms: int) -> DelayLevel | None:
    """The level a record with ``remaining_ms`` to wait goes to: the longest one not longer than that; None when the
    remaining delay is shorter than every level (it is then waited out in memory, under the smallest level)."""
    chosen = None
    for level in levels:  # ascending
        if level.ms > remaining_ms:
            break
        chosen = level
    return chosen


def level_of_topic(levels: Sequence[DelayLevel], topic: str) -> DelayLevel | None:
    """The level whose topic is ``topic``, if any."""
    return next((level for level in levels if level.topic == topic), None)


def delay_headers(
    target: str, deliver_at_ms: int, partition: int | None = None, delay_id: str | None = None
) -> list[tuple[str, bytes]]:
    """The contract's headers for a record to deliver to ``target`` at ``deliver_at_ms``."""
    headers = [(DELIVER_AT_HEADER, str(deliver_at_ms).encode()), (TARGET_HEADER, target.encode())]
    if partition is not None:
        headers.append((PARTITION_HEADER, str(partition).encode()))
    if delay_id is not None:
        headers.append((DELAY_ID_HEADER, delay_id.encode()))
    return headers


def header_value(headers: Sequence[tuple[str, bytes | None]], name: str) -> bytes | None:
    """The last value of header ``name`` (as Kafka's ``Headers.lastHeader``), None when absent."""
    for key, value in reversed(headers):
        if key == name:
            return value
    return None


def header_int(headers: Sequence[tuple[str, bytes | None]], name: str) -> int | None:
    """Header ``name`` as an ASCII decimal int; None when absent; ValueError when not a decimal."""
    raw = header_value(headers, name)
    if raw is None:
        return None
    text = raw.decode("ascii", errors="replace").strip()
    if not re.fullmatch(r"-?\d{1,19}", text):
        raise ValueError(f"header {name} is not an ASCII decimal: {raw[:40]!r}")
    return int(text)


def expired(timestamp_ms: int, headers: Sequence[tuple[str, bytes | None]], now_ms: int) -> bool:
    """The record's ``oncelog-ttl-ms`` has run out at ``now_ms`` (a malformed TTL header counts as none)."""
    try:
        ttl = header_int(headers, TTL_HEADER)
    except ValueError:
        return False
    return ttl is not None and ttl >= 0 and now_ms >= timestamp_ms + ttl


def schedule(
    levels: Sequence[DelayLevel],
    topic: str,
    partition: int | None,
    headers: Sequence[tuple[str, bytes | str | None]] | None,
    now_ms: int,
    *,
    delay_ms: int | None = None,
    deliver_at_ms: int | None = None,
    delay_id: str | None = None,
    ttl_ms: int | None = None,
    timestamp_ms: int | None = None,
) -> tuple[str, int | None, list[tuple[str, bytes | str | None]], int | None]:
    """Where the bundled producer sends a record given its delay options: (topic, partition, headers, timestamp).

    Without a delay (or one already due) the record goes to ``topic`` as asked; else to the level ``choose_level``
    picks (the smallest one when less than it remains) with the contract's headers, its timestamp now (the time it
    enters the level) and a given ``timestamp_ms`` kept as its original timestamp. ``ttl_ms`` adds ``oncelog-ttl-ms``.
    ValueError when both ``delay_ms`` and ``deliver_at_ms`` are given or a TTL is negative."""
    out = list(headers or [])
    if ttl_ms is not None:
        if ttl_ms < 0:
            raise ValueError("ttl_ms must not be negative")
        out.append((TTL_HEADER, str(ttl_ms).encode()))
    if delay_ms is not None and deliver_at_ms is not None:
        raise ValueError("give delay_ms or deliver_at_ms, not both")
    if delay_ms is not None:
        deliver_at_ms = now_ms + delay_ms
    if deliver_at_ms is None or deliver_at_ms <= now_ms:
        if delay_id is not None:
            out.append((DELAY_ID_HEADER, delay_id.encode()))
        return topic, partition, out, timestamp_ms
    level = choose_level(levels, deliver_at_ms - now_ms) or levels[0]
    out += delay_headers(topic, deliver_at_ms, partition, delay_id)
    if timestamp_ms is not None:
        out.append((ORIGINAL_TIMESTAMP_HEADER, str(timestamp_ms).encode()))
    return level.topic, None, out, now_ms


def commit_metadata(forwarded_at_ms: int, max_lateness_ms: int | None) -> str:
    """The metadata the DelayService commits with a level partition's offset: when it last forwarded from it and
    the largest lateness of the deliveries in that transaction (``-`` when none)."""
    lateness = "-" if max_lateness_ms is None else str(max_lateness_ms)
    return f"forwarded_at_ms={forwarded_at_ms} max_lateness_ms={lateness}"


def parse_commit_metadata(text: str | None) -> tuple[int | None, int | None]:
    """(forwarded_at_ms, max_lateness_ms) of :func:`commit_metadata`'s text; None for what it does not hold."""
    fields = dict(item.split("=", 1) for item in (text or "").split() if "=" in item)

    def number(name: str) -> int | None:
        value = fields.get(name, "")
        return int(value) if value.lstrip("-").isdigit() else None

    return number("forwarded_at_ms"), number("max_lateness_ms")
