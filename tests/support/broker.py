"""The oncelog broker as a real subprocess, for tests and the benchmark.

Contract (see the project brief): ``oncelog broker --data-dir DIR --listen 127.0.0.1:PORT [--set k=v ...]``,
logs to stderr, ready when the port accepts connections, graceful stop on SIGTERM.

Guaranteed: ``start()`` returns only once the port accepts connections, or raises ``BrokerStartError``
carrying the broker's stderr; ``stop()``/``kill()`` leave no process behind; ``restart()`` reuses the same
data dir and port(s). ``listeners=("PLAINTEXT", "SASL_PLAINTEXT")`` runs one listener per name, each on a free
port of its own (``ports[name]``, ``bootstrap_for(name)``; the first is ``port``), passed as ``--listen
NAME://127.0.0.1:PORT,...``; ``start()`` then waits for every one of them.
Stderr goes to ``<data_dir>/../broker-<port>.stderr.log`` (appended across restarts).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType

from .ports import can_connect, free_port, listening_inodes, socket_inodes

HOST = "127.0.0.1"
START_DEADLINE_S = 20.0
STOP_DEADLINE_S = 15.0


class BrokerStartError(RuntimeError):
    """The broker exited or never accepted connections; the message holds its stderr tail."""


def default_command() -> list[str]:
    """``<venv>/bin/oncelog broker`` when the console script exists, else ``python -m oncelog.broker``."""
    script = Path(sys.executable).with_name("oncelog")
    if script.exists():
        return [str(script), "broker"]
    return [sys.executable, "-m", "oncelog.broker", "broker"]


def process_cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` so far (every thread), from /proc/<pid>/stat."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # After the ")" that ends comm: fields[0] is state (field 3); utime/stime are fields 14/15.
    ticks = int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def child_pids(pid: int) -> list[int]:
    """The running children of process ``pid`` (of any of its threads), from /proc/<pid>/task/*/children."""
    children: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(FileNotFoundError):  # the thread ended meanwhile
            children.extend(int(child) for child in (task / "children").read_text().split())
    return children


class BrokerProcess:
    """One broker subprocess bound to ``127.0.0.1:port`` with a persistent data dir."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str] | None = None,
        *,
        port: int | None = None,
        settings: Mapping[str, str | int] | None = None,
        command: Sequence[str] | None = None,
        start_deadline_s: float = START_DEADLINE_S,
        env: Mapping[str, str] | None = None,
        listeners: Sequence[str] | None = None,
    ) -> None:
        self._own_tmp: tempfile.TemporaryDirectory[str] | None = None
        if data_dir is None:
            self._own_tmp = tempfile.TemporaryDirectory(prefix="oncelog-broker-")
            data_dir = Path(self._own_tmp.name) / "data"
        self.data_dir = Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = port if port is not None else free_port()
        #: Listener name -> port, when named listeners were asked for (the first one on ``port``).
        self.ports: dict[str, int] = {}
        for index, name in enumerate(listeners or ()):
            self.ports[name] = self.port if index == 0 else free_port()
        self.settings = dict(settings or {})
        self.command = list(command) if command is not None else default_command()
        self.start_deadline_s = start_deadline_s
        self.stderr_path = self.data_dir.parent / f"broker-{self.port}.stderr.log"
        self.proc: subprocess.Popen[bytes] | None = None
        #: Extra environment for the next start (e.g. ONCELOG_FAULTS); assign a new dict between restarts.
        self.env = dict(env or {})

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    def bootstrap_for(self, listener: str) -> str:
        """The address of the named listener."""
        return f"{HOST}:{self.ports[listener]}"

    @property
    def pid(self) -> int:
        if self.proc is None:
            raise RuntimeError("broker not running")
        return self.proc.pid

    def argv(self) -> list[str]:
        listen = (
            ",".join(f"{name}://{HOST}:{port}" for name, port in self.ports.items()) if self.ports else self.bootstrap
        )
        argv = [*self.command, "--data-dir", str(self.data_dir), "--listen", listen]
        for key, value in self.settings.items():
            argv += ["--set", f"{key}={value}"]
        return argv

    def stderr_tail(self, limit: int = 8000) -> str:
        try:
            return self.stderr_path.read_bytes()[-limit:].decode(errors="replace")
        except FileNotFoundError:
            return ""

    def start(self) -> BrokerProcess:
        """Spawn the broker and wait until it accepts connections (or raise with its stderr)."""
        if self.proc is not None and self.proc.poll() is None:
            raise RuntimeError("broker already running")
        with open(self.stderr_path, "ab") as err:
            err.write(f"\n==== start {' '.join(self.argv())}\n".encode())
            err.flush()
            self.proc = subprocess.Popen(
                self.argv(),
                stdin=subprocess.DEVNULL,
                stdout=err,
                stderr=err,
                start_new_session=True,
                env={**os.environ, **self.env},
            )
        end = time.monotonic() + self.start_deadline_s
        while True:
            code = self.proc.poll()
            if code is not None:
                self.proc = None
                raise BrokerStartError(f"broker exited with {code} before listening:\n{self.stderr_tail()}")
            ports = list(self.ports.values() or [self.port])
            # A port another process answers on is not the broker's: ours then fails to bind and exits (above).
            if all(can_connect(HOST, port) for port in ports) and self._listens_on(ports):
                return self
            if time.monotonic() > end:
                self.kill()
                raise BrokerStartError(
                    f"broker not accepting on {self.bootstrap} after {self.start_deadline_s}s:\n{self.stderr_tail()}"
                )
            time.sleep(0.05)

    def _listens_on(self, ports: list[int]) -> bool:
        """Whether the broker (or a child of it) holds the socket listening on each of ``ports``."""
        assert self.proc is not None
        held = set().union(*(socket_inodes(pid) for pid in (self.proc.pid, *child_pids(self.proc.pid))))
        return all(listening_inodes(port) & held for port in ports)

    def _signal_and_wait(self, sig: int, deadline_s: float) -> int | None:
        proc = self.proc
        if proc is None:
            return None
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                proc.wait(deadline_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
                self.proc = None
                raise RuntimeError(
                    f"broker ignored signal {sig} for {deadline_s}s; killed:\n{self.stderr_tail()}"
                ) from None
        self.proc = None
        return proc.returncode

    def wait_exit(self, timeout_s: float) -> int:
        """Wait for the broker to exit by itself (e.g. a crash fault point); returns its exit code."""
        if self.proc is None:
            raise RuntimeError("broker not running")
        code = self.proc.wait(timeout_s)
        self.proc = None
        return code

    def stop(self) -> int | None:
        """SIGTERM and wait; SIGKILL (and raise) if it does not stop in time. Returns the exit code."""
        return self._signal_and_wait(signal.SIGTERM, STOP_DEADLINE_S)

    def kill(self) -> int | None:
        """SIGKILL, no chance to flush; wait for the process to be gone."""
        return self._signal_and_wait(signal.SIGKILL, STOP_DEADLINE_S)

    def restart(self, *, hard: bool = False) -> BrokerProcess:
        """Stop (SIGKILL when ``hard``) and start again on the same data dir and port."""
        if hard:
            self.kill()
        else:
            self.stop()
        return self.start()

    def cpu_seconds(self) -> float:
        """utime + stime so far of the broker process and its running children (the fsync helper), from /proc."""
        return sum(process_cpu_seconds(pid) for pid in (self.pid, *child_pids(self.pid)))

    def close(self) -> None:
        """Stop if running (killing if SIGTERM fails) and delete a data dir this object created."""
        try:
            self.stop()
        except RuntimeError:
            pass
        finally:
            if self._own_tmp is not None:
                self._own_tmp.cleanup()
                self._own_tmp = None

    def __enter__(self) -> BrokerProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
