"""LogRateLimiter: at most ``burst`` lines per (event, key) per interval, with a count of the suppressed ones."""

from __future__ import annotations

from oncelog.broker.log_limit import LogRateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_burst_then_suppressed_then_counted_in_the_next_window() -> None:
    clock = Clock()
    limiter = LogRateLimiter(burst=3, interval_s=10, clock=clock)
    lines: list[dict] = []

    def method(event: str, **fields: object) -> None:
        lines.append({"event": event, **fields})

    for _ in range(50):
        limiter.log(method, "bad_request", "10.0.0.1", client="10.0.0.1")
    assert len(lines) == 3 and all("suppressed" not in line for line in lines)
    limiter.log(method, "bad_request", "10.0.0.2")  # another key has its own window
    assert len(lines) == 4
    clock.now = 10.0
    limiter.log(method, "bad_request", "10.0.0.1")
    assert lines[-1] == {"event": "bad_request", "suppressed": 47}
    limiter.log(method, "bad_request", "10.0.0.1")
    assert "suppressed" not in lines[-1]


def test_keys_are_bounded() -> None:
    clock = Clock()
    limiter = LogRateLimiter(burst=1, interval_s=10, max_keys=100, clock=clock)
    for key in range(10_000):
        assert limiter.admit("e", key) == 0
    assert len(limiter._windows) <= 100
