"""TCP ports on 127.0.0.1: free ones to hand out, and which process holds a socket (Linux: /proc)."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections import deque
from collections.abc import Iterator

#: How many of its latest answers ``free_port`` never repeats.
REMEMBERED_PORTS = 4096
#: Binds with port 0 ``free_port`` tries before it gives up.
MAX_ATTEMPTS = 1000
#: A listening socket's state in /proc/net/tcp.
TCP_LISTEN = "0A"

_handed_out: deque[int] = deque(maxlen=REMEMBERED_PORTS)
_handed_out_set: set[int] = set()


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago (bound with port 0, then released), and none of the last
    ``REMEMBERED_PORTS`` this process was given.

    The kernel's port 0 does give a released port out again: here 40 of 40,000 groups of five consecutive picks held
    one port twice. A cluster picks its ports (etcd's two, then each broker's) before starting anything, so such a
    repeat made one process fail to bind while a connect to its port, answered by the other, said it was up."""
    for _ in range(MAX_ATTEMPTS):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port not in _handed_out_set:
            if len(_handed_out) == REMEMBERED_PORTS:
                _handed_out_set.discard(_handed_out[0])
            _handed_out.append(port)
            _handed_out_set.add(port)
            return port
    raise RuntimeError(f"no port free on 127.0.0.1 outside the last {REMEMBERED_PORTS} handed out")


def _tcp_sockets() -> Iterator[tuple[str, str, str, int]]:
    """Every TCP socket of this network namespace as (local address, remote address, state, inode), the addresses
    as the kernel writes them (hex ``ADDRESS:PORT``) (Linux: /proc/net/tcp and tcp6)."""
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as lines:
            next(lines)  # the header
            for line in lines:
                fields = line.split()
                yield fields[1], fields[2], fields[3], int(fields[9])


def listening_inodes(port: int) -> set[int]:
    """The inodes of the sockets listening on TCP ``port`` at any local address."""
    return {
        inode
        for local, _remote, state, inode in _tcp_sockets()
        if state == TCP_LISTEN and int(local.rsplit(":", 1)[1], 16) == port
    }


def connected_inode(local_port: int, remote_port: int) -> int | None:
    """The inode of the loopback TCP socket bound to 127.0.0.1:``local_port`` and connected to
    127.0.0.1:``remote_port``, if there is one."""
    wanted = (f"0100007F:{local_port:04X}", f"0100007F:{remote_port:04X}")
    return next((inode for local, remote, _state, inode in _tcp_sockets() if (local, remote) == wanted), None)


def socket_inodes(pid: int) -> set[int]:
    """The inodes of the sockets process ``pid`` holds open (none once it is gone)."""
    inodes: set[int] = set()
    with contextlib.suppress(OSError):  # gone
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):  # closed meanwhile
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(int(target[len("socket:[") : -1]))
    return inodes


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
