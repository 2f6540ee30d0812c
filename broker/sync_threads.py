"""A fixed set of long-lived threads that run blocking sync calls (fdatasync) off the trio event loop.

Jobs go into one shared queue that every thread takes from, so independent jobs run in parallel and no thread is
started or looked up per job. Finished jobs are collected in a list; the trio side is woken (``wake`` via
``TrioToken.run_sync_soon``) once per batch of results, not once per job, and takes them with ``take_results``.

Guaranteed: every submitted item comes back exactly once from ``take_results``, with ``None`` or the exception the
sync function returned or raised; an exception it *raised* (a bug, not a storage failure) is also kept in ``crash``.
``close`` returns once every thread has exited; jobs still queued are finished first.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

import trio

T = TypeVar("T")

_STOP = object()


class SyncThreads(Generic[T]):
    """``count`` daemon threads applying ``sync`` to submitted items; ``wake`` runs in trio when results wait."""

    def __init__(
        self,
        count: int,
        sync: Callable[[T], BaseException | None],
        wake: Callable[[], object],
        token: trio.lowlevel.TrioToken,
        name: str = "oncelog-sync",
    ) -> None:
        if count < 1:
            raise ValueError("count must be >= 1")
        self._sync = sync
        self._wake = wake
        self._token = token
        self._jobs: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._results: list[tuple[T, BaseException | None]] = []
        self._wake_pending = False
        self.crash: BaseException | None = None
        self._threads = [threading.Thread(target=self._serve, name=f"{name}-{i}", daemon=True) for i in range(count)]
        for thread in self._threads:
            thread.start()

    def submit(self, item: T) -> None:
        """Queue one job; never blocks."""
        self._jobs.put(item)

    def take_results(self) -> list[tuple[T, BaseException | None]]:
        """The jobs finished since the last call, in the order they finished (call from the trio thread)."""
        with self._lock:
            results, self._results = self._results, []
            self._wake_pending = False
        return results

    def close(self) -> None:
        """Stop the threads once the queued jobs are done; blocks until they have exited."""
        for _ in self._threads:
            self._jobs.put(_STOP)
        for thread in self._threads:
            thread.join()

    def _serve(self) -> None:
        sync, jobs = self._sync, self._jobs
        while (item := jobs.get()) is not _STOP:
            try:
                outcome = sync(item)  # type: ignore[arg-type]
            except BaseException as exc:  # handed to the trio side, which re-raises it
                self.crash = outcome = exc
            with self._lock:
                self._results.append((item, outcome))  # type: ignore[arg-type]
                if self._wake_pending:
                    continue
                self._wake_pending = True
            with contextlib.suppress(trio.RunFinishedError):  # shutdown: nobody is left to wake
                self._token.run_sync_soon(self._wake)
