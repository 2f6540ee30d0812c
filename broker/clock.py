"""Wall-clock time as Kafka uses it (record timestamps, retention, producer expiration)."""

import time


def now_ms() -> int:
    """Milliseconds since the epoch."""
    return time.time_ns() // 1_000_000
