"""The broker's end of the fsync helper process (``oncelog.broker.sync_helper``).

``submit`` hands a job's file descriptors to the helper and returns at once; ``run`` (a task in the broker's nursery)
starts the helper, reads its answers and passes each batch of finished jobs to ``on_results``. The event loop's cost
per job is one ``sendmsg`` and a share of one ``recv`` loop: no thread of this process touches the GIL for a sync.

Guaranteed: while ``run`` runs, every submitted job comes back exactly once through ``on_results`` (in a trio task or
callback, never inside ``submit``), with None or the ``OSError`` of its first failed sync (jobs still out when ``run``
ends never come back); the descriptors a job was given are closed in any case. If the helper dies, ``run`` raises
``SyncHelperDied``: acknowledgements can no longer be made durable, so the broker stops, as it does on any other
internal failure. When ``run`` ends the helper is told to finish the syncs it holds and exit, and ``run`` waits for
it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

import trio
from oncelog.broker.sync_helper import MAX_FDS, REPLY, REQUEST

T = TypeVar("T")

_HELPER = str(Path(__file__).with_name("sync_helper.py"))
#: How long a stopping broker waits for the helper to finish its syncs before killing it.
_EXIT_WAIT_S = 10.0


class SyncHelperDied(RuntimeError):
    """The fsync helper process exited while the broker still needed it."""


@dataclass(slots=True)
class _Job(Generic[T]):
    item: T
    #: Requests (of up to MAX_FDS descriptors each) not answered yet.
    parts: int
    error: OSError | None = None


class SyncProcess(Generic[T]):
    """Sync files in a child process; see the module docstring."""

    def __init__(self, threads: int, on_results: Callable[[list[tuple[T, Exception | None]]], None]) -> None:
        self._threads = threads
        self._on_results = on_results
        self._sock: socket.socket | None = None
        self._pid: int | None = None
        self._jobs: dict[int, _Job[T]] = {}
        self._next_id = 0
        #: Requests the socket had no room for, sent in order once it has.
        self._backlog: deque[tuple[bytes, list[int]]] = deque()
        self._backlog_ready = trio.Event()
        #: Jobs that failed before reaching the helper, delivered by a trio callback.
        self._failed: list[tuple[T, Exception | None]] = []

    @property
    def running(self) -> bool:
        return self._sock is not None

    @property
    def pid(self) -> int | None:
        """The helper's process id while ``run`` runs."""
        return self._pid

    def submit(self, item: T, fds: Sequence[int], *, full: bool, delay_ms: int = 0) -> None:
        """Sync (``full``: fsync, else fdatasync) then close ``fds``; ``item`` comes back with the outcome.
        Takes ownership of ``fds`` even if it raises (it raises only when ``run`` is not running)."""
        if self._sock is None:
            for fd in fds:
                os.close(fd)
            raise RuntimeError("the fsync helper is not running")
        self._next_id += 1
        job_id = self._next_id
        chunks = [list(fds[i : i + MAX_FDS]) for i in range(0, len(fds), MAX_FDS)] or [[]]
        self._jobs[job_id] = _Job(item, len(chunks))
        request = REQUEST.pack(job_id, full, delay_ms)
        for chunk in chunks:
            self._send(request, chunk)

    def fail(self, item: T, error: Exception) -> None:
        """Deliver ``item`` with ``error`` as if its sync had failed (for a failure found before submitting)."""
        if not self._failed:
            trio.lowlevel.current_trio_token().run_sync_soon(self._deliver_failed)
        self._failed.append((item, error))

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start the helper and deliver its answers until cancelled (or until it dies: ``SyncHelperDied``)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with theirs:
            process = await trio.lowlevel.open_process(
                [sys.executable, "-I", "-S", _HELPER, str(theirs.fileno()), str(self._threads)],
                pass_fds=(theirs.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        try:
            with ours:
                ours.setblocking(False)
                self._sock, self._pid = ours, process.pid
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._send_backlog, ours)
                    task_status.started()
                    await self._read_answers(ours)
        finally:
            self._sock = self._pid = None
            for _request, fds in self._backlog:
                for fd in fds:
                    os.close(fd)
            self._backlog.clear()
            # Our end is closed: the helper finishes the syncs it holds and exits.
            with trio.CancelScope(shield=True):
                with trio.move_on_after(_EXIT_WAIT_S):
                    await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()

    def _send(self, request: bytes, fds: list[int]) -> None:
        assert self._sock is not None
        if not self._backlog:
            try:
                socket.send_fds(self._sock, [request], fds)
            except BlockingIOError:
                pass
            except OSError:  # the helper is gone: the reader finds out and raises
                for fd in fds:
                    os.close(fd)
                return
            else:
                for fd in fds:
                    os.close(fd)
                return
        self._backlog.append((request, fds))
        self._backlog_ready.set()

    async def _send_backlog(self, sock: socket.socket) -> None:
        while True:
            await self._backlog_ready.wait()
            self._backlog_ready = trio.Event()
            while self._backlog:
                request, fds = self._backlog[0]
                try:
                    socket.send_fds(sock, [request], fds)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(sock)
                    continue
                except OSError:
                    pass  # the helper is gone: the reader finds out and raises
                self._backlog.popleft()
                for fd in fds:
                    os.close(fd)

    async def _read_answers(self, sock: socket.socket) -> None:
        jobs = self._jobs
        while True:
            await trio.lowlevel.wait_readable(sock)
            finished: list[tuple[T, Exception | None]] = []
            while True:
                try:
                    answer = sock.recv(REPLY.size)
                except BlockingIOError:
                    break
                if not answer:
                    raise SyncHelperDied("the fsync helper process exited")
                job_id, error_number = REPLY.unpack(answer)
                job = jobs[job_id]
                if error_number and job.error is None:
                    job.error = OSError(error_number, os.strerror(error_number))
                job.parts -= 1
                if not job.parts:
                    del jobs[job_id]
                    finished.append((job.item, job.error))
            if finished:
                self._on_results(finished)

    def _deliver_failed(self) -> None:
        failed, self._failed = self._failed, []
        self._on_results(failed)
