"""Rate-limited logging for events a client (or the system) can repeat without bound: malformed requests, accept
failures while descriptors are exhausted.

Guaranteed: per (event, key) at most ``burst`` lines are written in any ``interval_s`` window; the first line
written after some were suppressed carries ``suppressed=<how many>``, so nothing is silently lost. The limiter
keeps at most ``max_keys`` windows (expired ones are dropped first, then the oldest), so a flood of distinct keys
costs bounded memory. structlog has no such processor and the rate-limiting packages limit calls, not log lines
with a count of what they dropped; this is small enough to own.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Any

#: Lines per (event, key) per interval.
DEFAULT_BURST = 5
DEFAULT_INTERVAL_S = 10.0
DEFAULT_MAX_KEYS = 1024


class _Window:
    __slots__ = ("passed", "start", "suppressed")

    def __init__(self, start: float) -> None:
        self.start = start
        self.passed = 0
        self.suppressed = 0


class LogRateLimiter:
    """Decides which of a repeated event's lines are written."""

    def __init__(
        self,
        burst: int = DEFAULT_BURST,
        interval_s: float = DEFAULT_INTERVAL_S,
        *,
        max_keys: int = DEFAULT_MAX_KEYS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.burst = burst
        self.interval_s = interval_s
        self.max_keys = max_keys
        self._clock = clock
        self._windows: dict[tuple[str, Hashable], _Window] = {}

    def admit(self, event: str, key: Hashable = None) -> int | None:
        """None when this line must be suppressed; otherwise how many lines of (event, key) were suppressed since
        the last one written."""
        now = self._clock()
        window = self._windows.get((event, key))
        if window is None or now - window.start >= self.interval_s:
            suppressed = window.suppressed if window is not None else 0
            if window is None:
                self._make_room(now)
            window = self._windows[(event, key)] = _Window(now)
            window.passed = 1
            return suppressed
        if window.passed < self.burst:
            window.passed += 1
            suppressed, window.suppressed = window.suppressed, 0
            return suppressed
        window.suppressed += 1
        return None

    def log(self, method: Callable[..., Any], event: str, key: Hashable = None, **fields: Any) -> None:
        """Call ``method(event, **fields)`` (a structlog bound logger's ``info``, ``warning``...) unless this line is
        suppressed; adds ``suppressed=N`` after suppressed lines."""
        suppressed = self.admit(event, key)
        if suppressed is None:
            return
        if suppressed:
            fields["suppressed"] = suppressed
        method(event, **fields)

    def _make_room(self, now: float) -> None:
        if len(self._windows) < self.max_keys:
            return
        for entry, window in list(self._windows.items()):
            if now - window.start >= self.interval_s:
                del self._windows[entry]
        while len(self._windows) >= self.max_keys:
            del self._windows[next(iter(self._windows))]
