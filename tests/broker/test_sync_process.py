"""SyncProcess and its helper: every job comes back once, with the real outcome of syncing real files."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import trio
from oncelog.broker.sync_helper import MAX_FDS
from oncelog.broker.sync_process import SyncProcess


class _Collector:
    def __init__(self) -> None:
        self.results: dict[object, list[Exception | None]] = {}
        self.arrived = trio.Event()

    def __call__(self, results: list[tuple[object, Exception | None]]) -> None:
        for item, error in results:
            self.results.setdefault(item, []).append(error)
        self.arrived.set()

    async def until(self, count: int) -> None:
        with trio.fail_after(10):
            while len(self.results) < count:
                self.arrived = trio.Event()
                await self.arrived.wait()


def _files(directory: Path, count: int) -> list[int]:
    """Descriptors of ``count`` new files, each with unsynced bytes."""
    fds = []
    for i in range(count):
        fd = os.open(directory / f"f{i}", os.O_CREAT | os.O_WRONLY)
        os.write(fd, b"x" * 100)
        fds.append(fd)
    return fds


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return True
    return state == "Z"


async def test_every_job_comes_back_once_and_its_descriptors_are_closed(tmp_path: Path) -> None:
    collector = _Collector()
    syncer: SyncProcess[object] = SyncProcess(4, collector)
    async with trio.open_nursery() as nursery:
        await nursery.start(syncer.run)
        fds = _files(tmp_path, 3)
        for i, fd in enumerate(fds):
            syncer.submit(i, [fd], full=bool(i % 2))
            with pytest.raises(OSError) as closed:
                os.fstat(fd)
            assert closed.value.errno == errno.EBADF
        syncer.submit("nothing to sync", [], full=False)
        await collector.until(4)
        await trio.sleep(0.05)  # nothing more arrives
        nursery.cancel_scope.cancel()
    assert collector.results == {0: [None], 1: [None], 2: [None], "nothing to sync": [None]}


async def test_a_job_of_more_files_than_one_request_carries_comes_back_once(tmp_path: Path) -> None:
    collector = _Collector()
    syncer: SyncProcess[object] = SyncProcess(4, collector)
    pipe_read, pipe_write = os.pipe()
    os.close(pipe_write)
    async with trio.open_nursery() as nursery:
        await nursery.start(syncer.run)
        syncer.submit("ok", _files(tmp_path, 2 * MAX_FDS + 5), full=False)
        # A pipe cannot be synced: one bad descriptor in the last request fails the whole job.
        (tmp_path / "bad").mkdir()
        syncer.submit("bad", [*_files(tmp_path / "bad", MAX_FDS + 1), pipe_read], full=False)
        await collector.until(2)
        await trio.sleep(0.05)
        nursery.cancel_scope.cancel()
    assert collector.results["ok"] == [None]
    [error] = collector.results["bad"]
    assert isinstance(error, OSError) and error.errno == errno.EINVAL


async def test_requests_the_socket_cannot_take_wait_in_order_and_all_come_back() -> None:
    """Four helper threads sleep on a delayed job each while thousands more are submitted: the socket fills, the rest
    wait in the backlog, and every job still comes back exactly once."""
    collector = _Collector()
    syncer: SyncProcess[object] = SyncProcess(4, collector)
    async with trio.open_nursery() as nursery:
        await nursery.start(syncer.run)
        for i in range(4):
            syncer.submit(("slow", i), [], full=False, delay_ms=300)
        for i in range(5000):
            syncer.submit(i, [], full=False)
        assert syncer._backlog, "the socket took every request: the backlog path went untested"
        await collector.until(5004)
        nursery.cancel_scope.cancel()
    assert all(errors == [None] for errors in collector.results.values())


async def test_the_helper_exits_when_run_ends() -> None:
    syncer: SyncProcess[object] = SyncProcess(2, lambda results: None)
    async with trio.open_nursery() as nursery:
        await nursery.start(syncer.run)
        pid = syncer.pid
        assert pid is not None and not _gone(pid)
        nursery.cancel_scope.cancel()
    assert syncer.pid is None and _gone(pid)
    with pytest.raises(RuntimeError, match="not running"):
        syncer.submit("late", [], full=False)


async def test_the_helper_outlives_signals_sent_to_its_whole_process_group() -> None:
    """SIGINT (Ctrl-C) and SIGTERM (a service manager stopping the group) reach the helper too; it keeps syncing so
    that the broker can shut down cleanly, and leaves when the broker closes the socket."""
    collector = _Collector()
    syncer: SyncProcess[object] = SyncProcess(2, collector)
    async with trio.open_nursery() as nursery:
        await nursery.start(syncer.run)
        pid = syncer.pid
        assert pid is not None
        syncer.submit("started", [], full=False)
        await collector.until(1)  # the helper is past its start-up, signal handlers included
        os.kill(pid, signal.SIGINT)
        os.kill(pid, signal.SIGTERM)
        await trio.sleep(0.2)
        syncer.submit("after the signals", [], full=False)
        await collector.until(2)
        assert not _gone(pid)
        nursery.cancel_scope.cancel()
    assert _gone(pid)


def test_the_helper_exits_when_its_broker_is_killed(tmp_path: Path) -> None:
    script = textwrap.dedent(
        """
        import sys, trio
        from oncelog.broker.sync_process import SyncProcess

        async def main():
            syncer = SyncProcess(2, lambda results: None)
            async with trio.open_nursery() as nursery:
                await nursery.start(syncer.run)
                print(syncer.pid, flush=True)
                await trio.sleep_forever()

        trio.run(main)
        """
    )
    broker = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert broker.stdout is not None
        helper = int(broker.stdout.readline())
        assert not _gone(helper)
        os.kill(broker.pid, signal.SIGKILL)
        broker.wait(10)
        deadline = time.monotonic() + 10
        while not _gone(helper):
            assert time.monotonic() < deadline, "the helper outlived its broker"
            time.sleep(0.01)
    finally:
        broker.kill()
        broker.wait()
