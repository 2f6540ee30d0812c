"""The consumer side of TTL (the design notes' consumer interceptor): which fetched records have outlived their
time-to-live, from their ``oncelog-ttl-ms`` header or else their topic's default."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from oncelog.client.delay import TTL_HEADER, expired
from oncelog.client.types import ConsumerRecord


class ExpiryFilter:
    """Splits records into live and expired; a record's own header wins over ``default_ttl_ms[topic]``."""

    def __init__(self, default_ttl_ms: Mapping[str, int] | None = None) -> None:
        self.default_ttl_ms = dict(default_ttl_ms or {})
        if any(ttl < 0 for ttl in self.default_ttl_ms.values()):
            raise ValueError("a topic's default TTL must not be negative")

    def is_expired(self, record: ConsumerRecord, now_ms: int) -> bool:
        headers = record.headers
        if not any(key == TTL_HEADER for key, _ in headers):
            default = self.default_ttl_ms.get(record.topic)
            return default is not None and now_ms >= record.timestamp + default
        return expired(record.timestamp, headers, now_ms)

    def split(
        self, records: Iterable[ConsumerRecord], now_ms: int
    ) -> tuple[list[ConsumerRecord], list[ConsumerRecord]]:
        """(live, expired), each in the given order. Cheap when no record has headers and no default applies."""
        records = list(records)
        if not any(record.headers for record in records) and not any(
            record.topic in self.default_ttl_ms for record in records[:1]
        ):
            return records, []
        live: list[ConsumerRecord] = []
        gone: list[ConsumerRecord] = []
        for record in records:
            (gone if self.is_expired(record, now_ms) else live).append(record)
        return live, gone
