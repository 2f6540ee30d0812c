"""What a broker needs before it can serve, checked at start-up with a one-line error naming the cause.

``StartupError``: the broker cannot start (its message is one line: which listener and address, which data dir and
why); the CLI prints it and exits with ``EXIT_STARTUP_FAILED``. ``DataDirLock``: the data dir exists, is a writable
directory with room for a write, and no other broker uses it: as Kafka's ``.lock``, an exclusive ``flock`` on
``<data dir>/.lock`` held for the broker's lifetime (released by the kernel however the process ends).
"""

from __future__ import annotations

import errno
import fcntl
import os
from pathlib import Path

#: Kafka's lock file name in each log dir.
LOCK_FILE = ".lock"


class StartupError(Exception):
    """The broker cannot start; ``str()`` is one line naming the cause."""


def _unusable(where: str, exc: OSError) -> StartupError:
    """``<where> is full (...)`` for ENOSPC/EDQUOT, else ``<where> is not usable (...)``, with the system's text."""
    state = "full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "not usable"
    return StartupError(f"{where} is {state} ({exc.strerror or exc})")


class DataDirLock:
    """The exclusive lock of one data dir (``acquire`` checks the dir, ``release`` lets it go)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.path = data_dir / LOCK_FILE
        self._fd: int | None = None

    def acquire(self) -> None:
        """Create the data dir if needed, take its lock and write this process's id into the lock file.

        Raises StartupError when the dir cannot be created, is not a directory, is not writable or is full, or
        another process holds the lock."""
        where = f"data dir {self.data_dir}"
        if self.data_dir.exists() and not self.data_dir.is_dir():
            raise StartupError(f"{where} is not a directory")
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            os.listdir(self.data_dir)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise _unusable(where, exc) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StartupError(f"{where} is in use by another broker (process {holder} holds {self.path})") from None
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            os.fsync(fd)
        except OSError as exc:
            os.close(fd)
            raise _unusable(where, exc) from None
        self._fd = fd

    def release(self) -> None:
        """Let the lock go (the file stays, as Kafka's)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
