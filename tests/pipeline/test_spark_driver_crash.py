"""The driver of a streaming copy is killed (SIGKILL, with its JVM) mid-stream and restarted from its
checkpoint: a read_committed reader of the output sees every input record exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .helpers import new_topic, produce, read_all

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "spark_copy.py"
N = 6000


def _start(bootstrap: str, source: str, dest: str, checkpoint: str, *extra: str) -> subprocess.Popen:
    argv = [
        sys.executable,
        str(EXAMPLE),
        "--bootstrap",
        bootstrap,
        "--input",
        source,
        "--output",
        dest,
        "--checkpoint",
        checkpoint,
        *extra,
    ]
    return subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)


def _committed_count(bootstrap: str, topic: str) -> int:
    return len(read_all(bootstrap, topic, idle_ms=300))


def test_driver_killed_mid_stream_then_restarted(bootstrap: str, tmp_path) -> None:
    source, dest = new_topic(bootstrap, "k-in", 2), new_topic(bootstrap, "k-out", 2)
    produce(bootstrap, source, N)
    checkpoint = str(tmp_path / "ck")
    proc = _start(bootstrap, source, dest, checkpoint, "--max-offsets-per-trigger", "300", "--master", "local[2]")
    try:
        deadline = time.monotonic() + 120
        while (seen := _committed_count(bootstrap, dest)) < 600:
            assert proc.poll() is None, proc.stderr.read().decode()[-3000:] if proc.stderr else ""
            assert time.monotonic() < deadline, "the pipeline made no progress"
            time.sleep(0.2)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    assert seen < N, "the stream finished before it could be killed"

    proc = _start(bootstrap, source, dest, checkpoint, "--available-now")
    try:
        _, err = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 0, err.decode()[-3000:]
    out = read_all(bootstrap, dest)
    assert sorted(r.value for r in out) == sorted(f"V{i}".encode() for i in range(N))
    assert sorted(r.key for r in out) == sorted(f"k{i}".encode() for i in range(N))
