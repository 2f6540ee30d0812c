"""Headers of a dead-lettered record: Spring Kafka's ``kafka_dlt-*`` names and encodings, so tools built for Spring's
DeadLetterPublishingRecoverer read them, plus ``oncelog-dead-letter-reason`` (why: ``ttl-expired``,
``invalid-delay-headers``, ``target-unavailable``, ``retries-exhausted``).

Encodings are Spring's: topic, group, timestamp type and exception texts UTF-8; partition a 4-byte big-endian int;
offset and timestamp 8-byte big-endian longs.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

from oncelog.client.delay import TTL_HEADER
from oncelog.client.types import ConsumerRecord

REASON_HEADER = "oncelog-dead-letter-reason"
REASON_TTL = "ttl-expired"
REASON_RETRIES_EXHAUSTED = "retries-exhausted"
DLT_ORIGINAL_TOPIC = "kafka_dlt-original-topic"
DLT_ORIGINAL_PARTITION = "kafka_dlt-original-partition"
DLT_ORIGINAL_OFFSET = "kafka_dlt-original-offset"
DLT_ORIGINAL_TIMESTAMP = "kafka_dlt-original-timestamp"
DLT_ORIGINAL_TIMESTAMP_TYPE = "kafka_dlt-original-timestamp-type"
DLT_ORIGINAL_CONSUMER_GROUP = "kafka_dlt-original-consumer-group"
DLT_EXCEPTION_FQCN = "kafka_dlt-exception-fqcn"
DLT_EXCEPTION_MESSAGE = "kafka_dlt-exception-message"
#: The names this module sets: a record dead-lettered twice carries only the latest of each.
DLT_HEADERS = frozenset(
    {
        REASON_HEADER,
        DLT_ORIGINAL_TOPIC,
        DLT_ORIGINAL_PARTITION,
        DLT_ORIGINAL_OFFSET,
        DLT_ORIGINAL_TIMESTAMP,
        DLT_ORIGINAL_TIMESTAMP_TYPE,
        DLT_ORIGINAL_CONSUMER_GROUP,
        DLT_EXCEPTION_FQCN,
        DLT_EXCEPTION_MESSAGE,
    }
)
_TIMESTAMP_TYPES = {0: "CreateTime", 1: "LogAppendTime"}


def dead_letter_headers(
    record: ConsumerRecord,
    reason: str,
    message: str,
    *,
    timestamp_ms: int | None = None,
    group_id: str | None = None,
    exception: BaseException | None = None,
    keep: Sequence[tuple[str, bytes | None]] | None = None,
) -> list[tuple[str, bytes | None]]:
    """``keep`` (default: the record's headers) without earlier dead-letter headers and without ``oncelog-ttl-ms`` (a
    dead letter does not expire again), then the dead-letter headers saying where ``record`` came from and why."""
    base = record.headers if keep is None else keep
    headers = [(k, v) for k, v in base if k not in DLT_HEADERS and k != TTL_HEADER]
    headers += [
        (REASON_HEADER, reason.encode()),
        (DLT_ORIGINAL_TOPIC, record.topic.encode()),
        (DLT_ORIGINAL_PARTITION, struct.pack(">i", record.partition)),
        (DLT_ORIGINAL_OFFSET, struct.pack(">q", record.offset)),
        (DLT_ORIGINAL_TIMESTAMP, struct.pack(">q", record.timestamp if timestamp_ms is None else timestamp_ms)),
        (DLT_ORIGINAL_TIMESTAMP_TYPE, _TIMESTAMP_TYPES.get(record.timestamp_type, "CreateTime").encode()),
        (DLT_EXCEPTION_MESSAGE, message.encode()),
    ]
    if group_id is not None:
        headers.append((DLT_ORIGINAL_CONSUMER_GROUP, group_id.encode()))
    if exception is not None:
        cls = type(exception)
        headers.append((DLT_EXCEPTION_FQCN, f"{cls.__module__}.{cls.__qualname__}".encode()))
    return headers
