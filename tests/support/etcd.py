"""A real etcd server (Debian's ``etcd-server``) as a subprocess on loopback ports, for tests and benchmarks.

Guaranteed: ``start()`` returns once the client port answers a range request, or raises ``EtcdStartError`` with
etcd's log tail; ``stop()`` / ``kill()`` leave no process behind; ``restart()`` reuses the data dir and ports, so
data written before survives (etcd fsyncs its WAL before answering).
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from .ports import free_port

HOST = "127.0.0.1"
START_DEADLINE_S = 20.0
STOP_DEADLINE_S = 10.0


class EtcdStartError(RuntimeError):
    """etcd exited or never answered; the message holds its log tail."""


def etcd_binary() -> str:
    """Path of the etcd server binary; tests that need it fail with this message when it is missing."""
    found = shutil.which("etcd")
    if found is None:
        raise EtcdStartError("etcd is not installed: `apt-get install etcd-server` (python3 dev.py test does this)")
    return found


class EtcdProcess:
    """One single-member etcd cluster on free loopback ports with a temporary data dir."""

    def __init__(self) -> None:
        self._tmp = tempfile.TemporaryDirectory(prefix="oncelog-etcd-")
        self.data_dir = Path(self._tmp.name) / "data"
        self.log_path = Path(self._tmp.name) / "etcd.log"
        self.client_port = free_port()
        self.peer_port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        """``HOST:PORT`` of the client port, the form ``etcd.connect`` takes."""
        return f"{HOST}:{self.client_port}"

    @property
    def url(self) -> str:
        return f"http://{self.endpoint}"

    def argv(self) -> list[str]:
        peer = f"http://{HOST}:{self.peer_port}"
        return [
            etcd_binary(),
            "--name=oncelog-test",
            f"--data-dir={self.data_dir}",
            f"--listen-client-urls={self.url}",
            f"--advertise-client-urls={self.url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=oncelog-test={peer}",
            "--initial-cluster-state=new",
        ]

    def start(self) -> EtcdProcess:
        log = self.log_path.open("ab")
        self.proc = subprocess.Popen(self.argv(), stdout=log, stderr=subprocess.STDOUT)
        log.close()
        deadline = time.monotonic() + START_DEADLINE_S
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.kill()
                raise EtcdStartError(f"etcd did not start on {self.url}:\n{self.log_tail()}")
            time.sleep(0.05)
        return self

    def _answers(self) -> bool:
        request = urllib.request.Request(self.url + "/v3/kv/range", data=json.dumps({"key": "AA=="}).encode())
        try:
            with urllib.request.urlopen(request, timeout=0.5) as response:
                return response.status == 200
        except (urllib.error.URLError, OSError):
            return False

    def log_tail(self, limit: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-limit:]
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after ``STOP_DEADLINE_S``."""
        self._end(signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL, as a power cut."""
        self._end(signal.SIGKILL)

    def _end(self, sig: int) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(STOP_DEADLINE_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None

    def restart(self) -> EtcdProcess:
        self.stop()
        return self.start()

    def close(self) -> None:
        self.kill()
        self._tmp.cleanup()

    def __enter__(self) -> EtcdProcess:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
