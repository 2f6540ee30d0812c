"""The CLI's progress bar: drawn on request, silent into pipes."""

from __future__ import annotations

import io

from oncelog.client.progress import ProgressBar


def test_bar_with_total_reaches_the_total() -> None:
    stream = io.StringIO()
    bar = ProgressBar("consume", 1000, stream=stream, enabled=True)
    for _ in range(10):
        bar.update(100)
    bar.close()
    last = stream.getvalue().rstrip("\n").split("\r")[-1]
    assert last.startswith("consume [" + "#" * 30 + "] 1,000/1,000 records")
    assert stream.getvalue().endswith("\n")


def test_bar_without_total_counts_records() -> None:
    stream = io.StringIO()
    bar = ProgressBar("produce", stream=stream, enabled=True)
    bar.update(12345)
    bar.close()
    assert "produce 12,345 records" in stream.getvalue()


def test_not_drawn_into_a_pipe() -> None:
    stream = io.StringIO()  # not a terminal
    bar = ProgressBar("produce", 10, stream=stream)
    bar.update(10)
    bar.close()
    assert stream.getvalue() == ""
