"""Retry and dead-letter for a consumer group: the policy, the topic names and the headers a retried record carries.

Naming: a group's failed records wait in the delay levels and come back on its own retry topic ``<group>-retry``;
past the last attempt they go to ``<group>-dlt``. Per group, as RocketMQ's ``%RETRY%<group>`` / ``%DLQ%<group>``
and Pulsar's ``<topic>-<subscription>-RETRY`` / ``-DLQ``, so a failure in one group never redelivers to the other
groups reading the same topic (Spring's per-topic ``<topic>-retry-<n>`` topics are shared by every group); one retry
topic serves every level because the delay levels, not the topic, hold the record for its delay (Spring needs a topic
per delay). ``%`` is not legal in Kafka topic names, hence ``-``; ``-dlt`` is Spring's suffix.

Headers (Spring's names where Spring has one, with Spring's encodings): ``retry_topic-attempts`` (4-byte big-endian
int: failed attempts so far), the ``kafka_dlt-original-*`` of the first delivery (kept across retries) and
``kafka_dlt-exception-fqcn`` / ``kafka_dlt-exception-message`` of the last failure, plus ``oncelog-dead-letter-reason``
(``retries-exhausted``) on the dead letter.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from oncelog.client.dead_letter import (
    DLT_EXCEPTION_FQCN,
    DLT_EXCEPTION_MESSAGE,
    DLT_HEADERS,
    DLT_ORIGINAL_TOPIC,
    REASON_HEADER,
    REASON_RETRIES_EXHAUSTED,
    dead_letter_headers,
)
from oncelog.client.delay import TTL_HEADER, header_value
from oncelog.client.types import ConsumerRecord

ATTEMPTS_HEADER = "retry_topic-attempts"
#: Spring's @RetryableTopic default: 3 attempts, 1 s apart.
DEFAULT_RETRY_DELAYS_MS = (1000, 1000)


def retry_topic(group_id: str) -> str:
    return f"{group_id}-retry"


def dead_letter_topic(group_id: str) -> str:
    return f"{group_id}-dlt"


@dataclass(frozen=True)
class RetryPolicy:
    """Attempt n+1 of a record follows its n-th failure after ``delays_ms[n-1]``; after ``max_attempts`` failures
    (``len(delays_ms) + 1``) it goes to the dead-letter topic (``None``: ``<group>-dlt``)."""

    delays_ms: tuple[int, ...] = DEFAULT_RETRY_DELAYS_MS
    dead_letter_topic: str | None = None

    def __post_init__(self) -> None:
        if any(delay < 0 for delay in self.delays_ms):
            raise ValueError("retry delays must not be negative")

    @property
    def max_attempts(self) -> int:
        return len(self.delays_ms) + 1


def failed_attempts(record: ConsumerRecord) -> int:
    """How many times ``record`` has failed before (0 for a first delivery)."""
    raw = header_value(record.headers, ATTEMPTS_HEADER)
    if raw is None or len(raw) != 4:
        return 0
    return max(0, struct.unpack(">i", raw)[0])


def failure_headers(
    record: ConsumerRecord, exception: BaseException, group_id: str, *, exhausted: bool
) -> list[tuple[str, bytes | None]]:
    """The headers of ``record`` sent on after a failure with ``exception``: attempts + 1, the first delivery's
    origin (kept when already there), the exception; the reason when ``exhausted``."""
    attempts = failed_attempts(record) + 1
    message = f"{type(exception).__name__}: {exception}"
    if header_value(record.headers, DLT_ORIGINAL_TOPIC) is None:
        headers = dead_letter_headers(record, REASON_RETRIES_EXHAUSTED, message, group_id=group_id, exception=exception)
        headers = [(k, v) for k, v in headers if k != REASON_HEADER]
    else:
        keep = {DLT_EXCEPTION_FQCN, DLT_EXCEPTION_MESSAGE, REASON_HEADER}
        headers = [(k, v) for k, v in record.headers if k not in keep and k != TTL_HEADER]
        cls = type(exception)
        headers += [
            (DLT_EXCEPTION_FQCN, f"{cls.__module__}.{cls.__qualname__}".encode()),
            (DLT_EXCEPTION_MESSAGE, message.encode()),
        ]
    headers = [(k, v) for k, v in headers if k != ATTEMPTS_HEADER]
    headers.append((ATTEMPTS_HEADER, struct.pack(">i", attempts)))
    if exhausted:
        headers.append((REASON_HEADER, REASON_RETRIES_EXHAUSTED.encode()))
    return headers


def app_headers(headers: Sequence[tuple[str, bytes | None]]) -> list[tuple[str, bytes | None]]:
    """``headers`` without the retry and dead-letter ones (what a handler's outputs inherit)."""
    return [(k, v) for k, v in headers if k not in DLT_HEADERS and k != ATTEMPTS_HEADER]
