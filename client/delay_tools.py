"""What ``oncelog delay stats`` and ``oncelog dlq show`` / ``dlq replay`` do, as library functions.

``delay_stats``: per delay level, the records pending (read_committed end offset minus the DelayService's committed
offset, summed over partitions) and, from the committed offsets' metadata, when the service last forwarded from it and
the largest lateness of that forward. ``replay``: an exactly-once copy of a dead-letter topic back to each record's
original topic (``kafka_dlt-original-topic``) or to a given one, without the dead-letter and retry headers, each batch a
transaction with the replaying group's offsets (so an interrupted replay resumes where it stopped).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oncelog.client.admin import Admin
from oncelog.client.consumer import Consumer
from oncelog.client.dead_letter import (
    DLT_EXCEPTION_MESSAGE,
    DLT_ORIGINAL_OFFSET,
    DLT_ORIGINAL_PARTITION,
    DLT_ORIGINAL_TOPIC,
    REASON_HEADER,
)
from oncelog.client.delay import CANCEL_TOPIC, DELAY_TOPIC_PREFIX, header_value, parse_commit_metadata
from oncelog.client.eos import next_batch, offsets_after, transaction
from oncelog.client.producer import Producer
from oncelog.client.retry import app_headers, failed_attempts
from oncelog.client.types import ConsumerRecord, OffsetAndMetadata, TopicPartition

#: The DelayService's group (``broker.delay.service.DELAY_GROUP_ID``; the client cannot import the broker).
DELAY_GROUP_ID = "__oncelog-delay"
LATEST = -1
EARLIEST = -2


@dataclass(frozen=True)
class LevelStats:
    topic: str
    pending: int
    last_forward_ms: int | None
    last_max_lateness_ms: int | None


async def delay_stats(bootstrap_servers: str, **security: Any) -> list[LevelStats]:
    """One row per existing delay level topic, shortest level first."""
    async with Admin(bootstrap_servers, **security) as admin:
        topics = {
            name: count
            for name, count in (await admin.list_topics()).items()
            if name.startswith(DELAY_TOPIC_PREFIX) and name != CANCEL_TOPIC
        }
    rows = []
    async with Consumer(
        bootstrap_servers, group_id=DELAY_GROUP_ID, isolation_level="read_committed", **security
    ) as consumer:
        for topic, count in topics.items():
            tps = [TopicPartition(topic, p) for p in range(count)]
            consumer.assign(tps)
            ends = await consumer.list_offsets(tps, LATEST)
            starts = await consumer.list_offsets(tps, EARLIEST)
            committed = await consumer.committed_many(tps)
            pending = 0
            forwards: list[tuple[int, int | None]] = []
            for tp in tps:
                om: OffsetAndMetadata | None = committed.get(tp)
                pending += max(0, ends[tp] - max(om.offset if om else starts[tp], starts[tp]))
                if om is not None:
                    at, lateness = parse_commit_metadata(om.metadata)
                    if at is not None:
                        forwards.append((at, lateness))
            last = max(forwards, default=(None, None), key=lambda f: f[0] or 0)
            rows.append(LevelStats(topic, pending, last[0], last[1]))
    return sorted(rows, key=lambda row: _level_ms(row.topic))


def _level_ms(topic: str) -> int:
    from oncelog.client.delay import parse_levels

    try:
        return parse_levels(topic[len(DELAY_TOPIC_PREFIX) :])[0].ms
    except ValueError:
        return 0


def describe_dead_letter(record: ConsumerRecord) -> dict[str, Any]:
    """The dead-letter facts of ``record``, for ``dlq show``."""
    headers = record.headers

    def text(name: str) -> str | None:
        raw = header_value(headers, name)
        return raw.decode(errors="replace") if raw is not None else None

    def number(name: str, fmt: str) -> int | None:
        raw = header_value(headers, name)
        return struct.unpack(fmt, raw)[0] if raw is not None and len(raw) == struct.calcsize(fmt) else None

    return {
        "partition": record.partition,
        "offset": record.offset,
        "key": record.key.decode(errors="replace") if record.key is not None else None,
        "reason": text(REASON_HEADER),
        "original_topic": text(DLT_ORIGINAL_TOPIC),
        "original_partition": number(DLT_ORIGINAL_PARTITION, ">i"),
        "original_offset": number(DLT_ORIGINAL_OFFSET, ">q"),
        "attempts": failed_attempts(record),
        "error": text(DLT_EXCEPTION_MESSAGE),
    }


async def replay(
    bootstrap_servers: str,
    topic: str,
    *,
    to: str | None = None,
    transactional_id: str | None = None,
    group_id: str | None = None,
    batch: int = 500,
    idle_timeout_ms: int = 2000,
    progress: Callable[[int], None] | None = None,
    **security: Any,
) -> tuple[int, int]:
    """Replay ``topic`` until it is idle for ``idle_timeout_ms``; returns (replayed, skipped: records with neither a
    ``to`` nor an original topic). ``progress`` is called with each committed batch's size."""
    group = group_id or f"oncelog-dlq-replay-{topic}"
    replayed = skipped = 0
    async with (
        Consumer(
            bootstrap_servers,
            group_id=group,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            skip_expired=False,
            **security,
        ) as consumer,
        Producer(bootstrap_servers, transactional_id=transactional_id or group, **security) as producer,
    ):
        consumer.assign(await consumer.partitions_for_topic(topic))
        await producer.init_transactions()
        while got := await next_batch(consumer, batch, idle_timeout_ms):
            done = 0
            async with transaction(producer):
                for records in got.values():
                    for record in records:
                        target = to or (header_value(record.headers, DLT_ORIGINAL_TOPIC) or b"").decode() or None
                        if target is None:
                            skipped += 1
                            continue
                        headers = app_headers(record.headers)
                        await producer.send(
                            target, record.value, record.key, headers=headers, timestamp_ms=record.timestamp
                        )
                        done += 1
                await producer.send_offsets_to_transaction(offsets_after(got), consumer.group_metadata())
            replayed += done
            if progress is not None:
                progress(done)
        return replayed, skipped
