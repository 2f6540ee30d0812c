"""What the DelayService does with one record of a delay level, as a pure function of the record and the time.

A record in level L is acted on at ``entered + L``, ``entered`` being its timestamp in the level topic (the time it was
appended there), or at ``deliver_at`` when that comes first or, in a level above the smallest one S, less than S after
``entered + L`` (the last bit of its wait is spent holding its partition's head in memory, not in one more transaction
through S). Acting means, in this order: drop it when its delay id was cancelled; dead-letter it when it is malformed or
its TTL ran out; deliver it when due; else move it to the longest level not longer than the remaining delay; else (less
than S remains, because it was acted on late) enter S and wait there. A record put in the longest level not longer
than its delay is acted on in its partition's append order, so only a partition's head needs watching, and a head
waiting past its ``entered + L`` holds the records behind it (acted on at their ``entered + L`` or later) for less than
S past their act time: lateness stays under S plus a forward's time, as without the hold, and a delay takes one
transaction fewer.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass, field

from oncelog.client.dead_letter import REASON_TTL
from oncelog.client.delay import (
    DELAY_ID_HEADER,
    DELIVER_AT_HEADER,
    ORIGINAL_TIMESTAMP_HEADER,
    PARTITION_HEADER,
    TARGET_HEADER,
    TTL_HEADER,
    DelayLevel,
    choose_level,
    expired,
    header_int,
)
from oncelog.client.types import ConsumerRecord

REASON_INVALID = "invalid-delay-headers"
REASON_NO_TARGET = "target-unavailable"


@dataclass(slots=True)
class Wait:
    """Nothing to do before ``until_ms``."""

    until_ms: int


@dataclass(slots=True)
class Deliver:
    """Due: send to ``target`` (``partition``, or the key's partition when None) with the original timestamp and
    ``headers``, the record's own without the delay headers (found by ``route`` in its pass over them)."""

    target: str
    partition: int | None
    deliver_at_ms: int
    timestamp_ms: int
    headers: Sequence[tuple[str, bytes | None]] = field(default=(), compare=False)


@dataclass(slots=True)
class Hop:
    """Not due yet: move to ``level`` (the record enters it now)."""

    level: DelayLevel
    timestamp_ms: int


@dataclass(slots=True)
class DeadLetter:
    """Undeliverable (``reason``, ``detail``): to the dead-letter topic when one is configured, else dropped."""

    reason: str
    detail: str
    timestamp_ms: int


@dataclass(slots=True)
class Cancelled:
    """Its ``oncelog-delay-id`` was cancelled: dropped."""

    delay_id: str


#: An action is a value: not changed once made (not frozen, whose construction costs twice as much per record).
Action = Wait | Deliver | Hop | DeadLetter | Cancelled


#: The headers ``route`` reads, found in one pass over a record's headers.
_ROUTED_HEADERS = frozenset(
    {DELIVER_AT_HEADER, PARTITION_HEADER, ORIGINAL_TIMESTAMP_HEADER, TARGET_HEADER, DELAY_ID_HEADER, TTL_HEADER}
)


def _routed_headers(
    headers: Sequence[tuple[str, bytes | None]],
) -> tuple[dict[str, bytes | None], list[tuple[str, bytes | None]]]:
    """The last value of each header ``route`` reads (as ``header_value``), and the headers a delivered record keeps
    (all but ``DELAY_HEADERS``), in one pass."""
    found: dict[str, bytes | None] = {}
    kept: list[tuple[str, bytes | None]] = []
    for header in headers:
        key = header[0]
        if key in _ROUTED_HEADERS:
            found[key] = header[1]
            if key == TTL_HEADER:
                kept.append(header)
        else:
            kept.append(header)
    return found, kept


#: Target topic names by their header's bytes (a service delivers to few topics; bounded by ``_TARGETS_KEPT``).
_targets: dict[bytes, str] = {}
_TARGETS_KEPT = 1024


def _target(raw: bytes) -> str:
    """``raw`` decoded as UTF-8 (UnicodeDecodeError if it is not), from a small cache."""
    target = _targets.get(raw)
    if target is None:
        target = raw.decode()
        if len(_targets) >= _TARGETS_KEPT:
            _targets.clear()
        _targets[raw] = target
    return target


def _as_int(found: dict[str, bytes | None], name: str) -> int | None:
    """``header_int`` of a header ``_routed_headers`` found; plain digits (the usual case) skip its pattern."""
    raw = found.get(name)
    if raw is None:
        return None
    if raw.isdigit() and len(raw) <= 19:  # bytes.isdigit: ASCII digits only
        return int(raw)
    return header_int(((name, raw),), name)


def route(
    record: ConsumerRecord,
    level: DelayLevel,
    levels: Sequence[DelayLevel],
    now_ms: int,
    cancelled: Container[str] = (),
) -> Action:
    """The action for ``record`` of ``level`` at ``now_ms`` (see the module docstring)."""
    found, kept = _routed_headers(record.headers)
    try:
        deliver_at = _as_int(found, DELIVER_AT_HEADER)
        partition = _as_int(found, PARTITION_HEADER)
        original = _as_int(found, ORIGINAL_TIMESTAMP_HEADER)
        raw_target = found.get(TARGET_HEADER)
        target = _target(raw_target) if raw_target is not None else None
    except (ValueError, UnicodeDecodeError) as exc:
        return DeadLetter(REASON_INVALID, str(exc), record.timestamp)
    timestamp = original if original is not None else record.timestamp
    if deliver_at is None or not target:
        missing = DELIVER_AT_HEADER if deliver_at is None else TARGET_HEADER
        return DeadLetter(REASON_INVALID, f"header {missing} is missing", timestamp)
    if partition is not None and partition < 0:
        return DeadLetter(REASON_INVALID, f"header {PARTITION_HEADER} is negative", timestamp)
    act_at = record.timestamp + level.ms
    if deliver_at < act_at + (0 if level.ms == levels[0].ms else levels[0].ms):
        act_at = deliver_at  # due within its level, or less than the smallest level after: waited out here
    if now_ms < act_at:
        return Wait(act_at)
    raw_id = found.get(DELAY_ID_HEADER)
    if raw_id is not None and (delay_id := raw_id.decode(errors="replace")) in cancelled:
        return Cancelled(delay_id)
    if TTL_HEADER in found and expired(timestamp, ((TTL_HEADER, found[TTL_HEADER]),), now_ms):
        return DeadLetter(REASON_TTL, f"{record.topic}: the record's oncelog-ttl-ms ran out while delayed", timestamp)
    if now_ms >= deliver_at:
        return Deliver(target, partition, deliver_at, timestamp, kept)
    next_level = choose_level(levels, deliver_at - now_ms)
    if next_level is not None:
        return Hop(next_level, timestamp)
    # Acted on late, with less than the smallest level left: waiting for it here could hold this partition's later
    # records more than the smallest level past their act time, so it enters the smallest level and waits there.
    return Hop(levels[0], timestamp)
