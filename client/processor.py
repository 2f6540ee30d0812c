"""An exactly-once processor with retries: a group reads its topics and its retry topic read_committed, calls a
handler per record, and in one transaction per batch writes the handler's outputs, the failed records to their next
retry (through the delay levels) or to the dead-letter topic, and the consumed offsets.

Guarantees: a record's outcome (its outputs, its retry, or its dead letter) commits atomically with its offset, so
after a crash nothing is output, retried or dead-lettered twice; a handler that fails twice and then succeeds yields
its outputs once. The handler must not write to Kafka itself: it returns its outputs as ``(topic, key, value)``.
A failed record returns after its policy delay on ``<group>-retry`` (``client.retry``), to this group only; a record
past its ``oncelog-ttl-ms`` goes to the dead-letter topic without reaching the handler.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from oncelog.client.consumer import Consumer
from oncelog.client.dead_letter import REASON_TTL, dead_letter_headers
from oncelog.client.eos import next_batch, offsets_after, transaction
from oncelog.client.expiry import ExpiryFilter
from oncelog.client.producer import Producer
from oncelog.client.retry import (
    RetryPolicy,
    app_headers,
    dead_letter_topic,
    failed_attempts,
    failure_headers,
    retry_topic,
)
from oncelog.client.types import ConsumerRecord, TopicPartition

_EXPIRY = ExpiryFilter()
Output = tuple[str, Any, Any]
Handler = Callable[[ConsumerRecord], Iterable[Output] | Awaitable[Iterable[Output] | None] | None]


@dataclass
class ProcessStats:
    read: int = 0
    written: int = 0
    retried: int = 0
    dead_lettered: int = 0


async def process(
    bootstrap_servers: str,
    topics: Sequence[str],
    handler: Handler,
    *,
    group_id: str,
    transactional_id: str,
    policy: RetryPolicy | None = None,
    batch: int = 500,
    idle_timeout_ms: int | None = None,
    **config: Any,
) -> ProcessStats:
    """Process ``topics`` (and the group's retry topic) until cancelled, or until nothing arrived for
    ``idle_timeout_ms``; returns the counts. ``config``: ``delay_levels`` (the brokers') and security settings."""
    policy = policy or RetryPolicy()
    retries = retry_topic(group_id)
    dead = policy.dead_letter_topic or dead_letter_topic(group_id)
    stats = ProcessStats()
    delay_levels = config.pop("delay_levels", None)
    producer_config = dict(config) if delay_levels is None else {**config, "delay_levels": delay_levels}
    async with (
        Consumer(
            bootstrap_servers,
            group_id=group_id,
            isolation_level="read_committed",
            auto_offset_reset="earliest",
            skip_expired=False,  # expired records are dead-lettered below, in the transaction
            **config,
        ) as consumer,
        Producer(bootstrap_servers, transactional_id=transactional_id, **producer_config) as producer,
    ):
        partitions: list[TopicPartition] = []
        for topic in [*topics, retries]:
            partitions += await consumer.partitions_for_topic(topic)
        consumer.assign(partitions)
        await producer.init_transactions()
        while got := await next_batch(consumer, batch, idle_timeout_ms):
            async with transaction(producer):
                for records in got.values():
                    for record in records:
                        stats.read += 1
                        await _handle(producer, record, handler, policy, group_id, retries, dead, stats)
                await producer.send_offsets_to_transaction(offsets_after(got), consumer.group_metadata())
        return stats


async def _handle(
    producer: Producer,
    record: ConsumerRecord,
    handler: Handler,
    policy: RetryPolicy,
    group_id: str,
    retries: str,
    dead: str,
    stats: ProcessStats,
) -> None:
    if _EXPIRY.is_expired(record, int(time.time() * 1000)):
        message = f"{record.topic}: past its time-to-live"
        headers = dead_letter_headers(record, REASON_TTL, message, group_id=group_id)
        await producer.send(dead, record.value, record.key, headers=headers, timestamp_ms=record.timestamp)
        stats.dead_lettered += 1
        return
    try:
        result = handler(record)
        if inspect.isawaitable(result):
            result = await result
        outputs = list(result or [])
    except Exception as exc:
        attempt = failed_attempts(record) + 1
        if attempt < policy.max_attempts:
            headers = failure_headers(record, exc, group_id, exhausted=False)
            delay = policy.delays_ms[attempt - 1]
            await producer.send(
                retries, record.value, record.key, headers=headers, delay_ms=delay, timestamp_ms=record.timestamp
            )
            stats.retried += 1
        else:
            headers = failure_headers(record, exc, group_id, exhausted=True)
            await producer.send(dead, record.value, record.key, headers=headers, timestamp_ms=record.timestamp)
            stats.dead_lettered += 1
        return
    for topic, key, value in outputs:
        await producer.send(topic, value, key, headers=app_headers(record.headers))
        stats.written += 1
