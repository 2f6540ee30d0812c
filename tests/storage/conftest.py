"""Storage tests close what they open.

``logs`` opens the logs and log managers of one test and closes every descriptor they hold when it ends; every test
runs under ``no_leaked_descriptors``, which fails it when the pytest process holds more file descriptors after it than
before (logs opened by tests and never closed once left about 1,500 open after this directory).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from support.opened_logs import OpenedLogs

#: Descriptors a test may leave open without failing (the interpreter or a library opening a file once, for good);
#: a leaked log holds four per segment (log, offset, time and transaction index), so none slips under it.
FD_TOLERANCE = 1


@pytest.fixture
def logs() -> Iterator[OpenedLogs]:
    """Logs and log managers whose descriptors are closed when the test ends."""
    opened = OpenedLogs()
    try:
        yield opened
    finally:
        opened.close_all()


def open_fds() -> dict[str, str]:
    """This process's open descriptors and what each one names."""
    found: dict[str, str] = {}
    for fd in os.listdir("/proc/self/fd"):
        try:
            found[fd] = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:  # the descriptor listdir itself used, closed by now
            continue
    return found


@pytest.fixture(autouse=True)
def no_leaked_descriptors() -> Iterator[None]:
    """Fail the test when it leaves more than ``FD_TOLERANCE`` descriptors open in this process."""
    before = open_fds()
    yield
    after = open_fds()
    leaked = sorted(target for fd, target in after.items() if before.get(fd) != target)
    assert len(after) - len(before) <= FD_TOLERANCE, f"{len(after) - len(before)} descriptors left open: {leaked[:8]}"
