"""The fsync helper: a child process that fdatasyncs (or fsyncs) the files its broker sends it.

Why a process: a Python sync thread must take the GIL back after every fdatasync, and each time it takes it from the
event loop, which then waits to resume; at a few thousand fsyncs per second that hand-over cost the broker more CPU
than its own request handling. Here the broker only sends a message and later reads an answer; the helper's threads
contend for the helper's GIL, not the broker's.

Protocol, on the ``SOCK_SEQPACKET`` socket whose descriptor is the first argument (one message per job, each way):

- request: ``REQUEST`` (job id, full flag, delay in ms) with the files' descriptors attached (``SCM_RIGHTS``). The
  helper waits ``delay`` ms, then fsyncs (full) or fdatasyncs each file in order, stopping at the first failure, and
  closes the descriptors.
- reply: ``REPLY`` (job id, errno; 0 is success), in the order jobs finish.

The helper exits when the broker's end of the socket closes, however the broker ended; it ignores SIGINT and
SIGTERM, which a terminal or a service manager sends to the whole process group. Run as a script
(``python -I -S sync_helper.py FD THREADS``); it imports only the standard library, so it starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import struct
import sys
import threading
import time

REQUEST = struct.Struct("<QBxxxI")
REPLY = struct.Struct("<Qi")
#: Descriptors one request may carry; the broker splits larger jobs.
MAX_FDS = 64


def sync_files(fds: list[int], *, full: bool, delay_ms: int) -> int:
    """Sync then close every descriptor; the errno of the first failure, or 0."""
    outcome = 0
    sync = os.fsync if full else os.fdatasync
    try:
        if delay_ms:
            time.sleep(delay_ms / 1000)
        for fd in fds:
            sync(fd)
    except OSError as exc:
        outcome = exc.errno or errno.EIO
    finally:
        for fd in fds:
            os.close(fd)
    return outcome


def serve(sock: socket.socket, threads: int) -> None:
    """Answer requests until the broker closes its end. Every thread reads requests itself, so a request goes from
    the socket to a sync with no hand-over between threads."""

    def work() -> None:
        while True:
            message, fds, _flags, _address = socket.recv_fds(sock, REQUEST.size, MAX_FDS)
            if not message:
                return  # the broker is gone; every thread sees the end of the socket
            job_id, full, delay_ms = REQUEST.unpack(message)
            outcome = sync_files(fds, full=bool(full), delay_ms=delay_ms)
            with contextlib.suppress(OSError):  # the broker is gone: the other threads finish their syncs all the same
                sock.send(REPLY.pack(job_id, outcome))

    workers = [threading.Thread(target=work) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()


if __name__ == "__main__":
    # A terminal's Ctrl-C or a service manager's SIGTERM to the whole group must not end the helper before its
    # broker: the broker shuts down cleanly only while its fsyncs still work, and its exit closes the socket.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    serve(socket.socket(fileno=int(sys.argv[1])), int(sys.argv[2]))
