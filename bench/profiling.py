"""Optional py-spy profiles of every broker the suite starts (``bench/run.py --profile DIR``).

``BrokerProfiler.install()`` wraps ``BrokerProcess.start`` so that each started broker gets a
``py-spy record --nonblocking --gil -f raw`` attached (samples only while the broker holds the GIL, i.e. runs
Python code), writing ``DIR/<label>-<n>.txt`` (collapsed stacks, one line per
stack with its sample count). py-spy stops by itself when the broker exits. Guaranteed: ``close()`` restores
``BrokerProcess.start`` and waits for (or, after a deadline, kills) every py-spy it started.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.broker import BrokerProcess

RATE_HZ = 200
WAIT_S = 30.0


def py_spy_path() -> str | None:
    """py-spy next to this interpreter (the venv), else on PATH."""
    local = Path(sys.executable).with_name("py-spy")
    return str(local) if local.exists() else shutil.which("py-spy")


class BrokerProfiler:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.label = "broker"
        self._procs: list[subprocess.Popen[bytes]] = []
        self._original = BrokerProcess.start
        self._count = 0
        self.files: list[Path] = []

    def install(self) -> BrokerProfiler:
        exe = py_spy_path()
        if exe is None:
            raise RuntimeError("py-spy not found")
        self.directory.mkdir(parents=True, exist_ok=True)
        original, profiler = self._original, self

        def start(broker: BrokerProcess) -> BrokerProcess:
            result = original(broker)
            profiler._count += 1
            out = profiler.directory / f"{profiler.label}-{profiler._count}.txt"
            profiler.files.append(out)
            cmd = [exe, "record", "--nonblocking", "--gil", "-r", str(RATE_HZ), "-f", "raw", "-o", str(out)]
            profiler._procs.append(
                subprocess.Popen([*cmd, "-p", str(broker.pid)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            )
            return result

        BrokerProcess.start = start  # type: ignore[method-assign]
        return self

    def close(self) -> None:
        BrokerProcess.start = self._original  # type: ignore[method-assign]
        for proc in self._procs:
            try:
                proc.wait(WAIT_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(5)
        self._procs.clear()
