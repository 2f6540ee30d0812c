"""A one-line progress bar for the CLI's long runs, drawn on a terminal only (never into pipes or files)."""

from __future__ import annotations

import sys
import time
from typing import IO

#: Redraw at most this often.
REDRAW_INTERVAL_S = 0.2
BAR_WIDTH = 30


class ProgressBar:
    """``update(n)`` as records go by, ``close()`` at the end; a no-op unless ``stream`` is a terminal (or
    ``enabled`` says otherwise)."""

    def __init__(
        self, label: str, total: int | None = None, *, stream: IO[str] | None = None, enabled: bool | None = None
    ) -> None:
        self._stream = stream if stream is not None else sys.stderr
        self._enabled = self._stream.isatty() if enabled is None else enabled
        self._label = label
        self._total = total
        self._count = 0
        self._started = time.monotonic()
        self._drawn_at = 0.0

    def update(self, added: int) -> None:
        self._count += added
        now = time.monotonic()
        if self._enabled and now - self._drawn_at >= REDRAW_INTERVAL_S:
            self._draw(now)

    def close(self) -> None:
        if self._enabled:
            self._draw(time.monotonic())
            self._stream.write("\n")
            self._stream.flush()

    def render(self, now: float) -> str:
        rate = self._count / max(now - self._started, 1e-9)
        if self._total:
            done = min(self._count / self._total, 1.0)
            filled = int(done * BAR_WIDTH)
            bar = "#" * filled + "." * (BAR_WIDTH - filled)
            return f"{self._label} [{bar}] {self._count:,}/{self._total:,} records, {rate:,.0f}/s"
        return f"{self._label} {self._count:,} records, {rate:,.0f}/s"

    def _draw(self, now: float) -> None:
        self._drawn_at = now
        self._stream.write("\r" + self.render(now))
        self._stream.flush()
