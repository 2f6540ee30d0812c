"""The test harness's port picker: the ports a test is given are all distinct, so no two processes it starts race for
one."""

from __future__ import annotations

from support.ports import REMEMBERED_PORTS, free_port


def test_free_port_never_repeats_one_of_its_latest_answers() -> None:
    # The kernel's port 0 alone repeats a port within a few thousand picks almost surely (about 14,000 to choose from).
    ports = [free_port() for _ in range(REMEMBERED_PORTS)]
    assert len(set(ports)) == REMEMBERED_PORTS
