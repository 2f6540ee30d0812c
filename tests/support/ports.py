"""Free TCP ports on 127.0.0.1."""

from __future__ import annotations

import socket
import time


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (bound with port 0, then released)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def can_connect(host: str, port: int, timeout: float = 0.2) -> bool:
    """True when a TCP connect to host:port succeeds within ``timeout`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def wait_port_closed(host: str, port: int, deadline_s: float) -> None:
    """Block until nothing accepts on host:port; raise TimeoutError after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while can_connect(host, port):
        if time.monotonic() > end:
            raise TimeoutError(f"{host}:{port} still accepting after {deadline_s}s")
        time.sleep(0.05)
