"""The BrokerProcess harness itself, exercised with a stand-in broker (a tiny Python TCP listener)."""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import pytest
from support.broker import BrokerProcess, BrokerStartError
from support.ports import can_connect

FAKE_BROKER = r"""
import argparse, signal, socket, sys, time
p = argparse.ArgumentParser()
p.add_argument("--data-dir"); p.add_argument("--listen"); p.add_argument("--set", action="append", default=[])
a = p.parse_args()
if "fail=1" in a.set:
    print("boom: refusing to start", file=sys.stderr); sys.exit(3)
host, port = a.listen.rsplit(":", 1)
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((host, int(port))); s.listen()
with open(a.data_dir + "/starts", "a") as f: f.write("x")
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
print("listening", file=sys.stderr, flush=True)
while True: time.sleep(1)
"""


@pytest.fixture
def fake_cmd(tmp_path: Path) -> list[str]:
    script = tmp_path / "fake_broker.py"
    script.write_text(FAKE_BROKER)
    return [sys.executable, str(script)]


def test_start_stop_kill_restart(tmp_path: Path, fake_cmd: list[str]) -> None:
    proc = BrokerProcess(tmp_path / "data", command=fake_cmd, settings={"num.partitions": 1})
    try:
        proc.start()
        assert proc.bootstrap == f"127.0.0.1:{proc.port}"
        assert can_connect("127.0.0.1", proc.port)
        assert "--set" in proc.argv() and "num.partitions=1" in proc.argv()
        assert proc.cpu_seconds() >= 0
        pid = proc.pid
        proc.restart(hard=True)  # SIGKILL then start on the same dir/port
        assert proc.pid != pid and can_connect("127.0.0.1", proc.port)
        assert proc.kill() == -9
        assert not can_connect("127.0.0.1", proc.port)
        proc.start()
        assert proc.stop() == 0  # graceful SIGTERM
        assert (tmp_path / "data" / "starts").read_text() == "xxx"
        assert "listening" in proc.stderr_tail()
    finally:
        proc.close()
    with pytest.raises(OSError):
        os.kill(pid, 0)


def test_start_failure_reports_stderr(tmp_path: Path, fake_cmd: list[str]) -> None:
    proc = BrokerProcess(tmp_path / "data", command=fake_cmd, settings={"fail": 1})
    with pytest.raises(BrokerStartError, match="boom: refusing to start"):
        proc.start()
    proc.close()


def test_start_timeout_kills_the_process(tmp_path: Path) -> None:
    silent = [
        sys.executable,
        "-c",
        "import time, sys; print('never listening', file=sys.stderr); time.sleep(60)",
    ]
    proc = BrokerProcess(tmp_path / "data", command=silent, start_deadline_s=1.0)
    with pytest.raises(BrokerStartError, match="never listening"):
        proc.start()
    assert proc.proc is None
    proc.close()


def test_a_port_another_process_answers_on_is_no_start(tmp_path: Path, fake_cmd: list[str]) -> None:
    """The broker cannot bind a port that is taken, and a connect answered by its taker must not pass for the broker
    listening: the start reports the broker's failure."""
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        proc = BrokerProcess(tmp_path / "data", command=fake_cmd, port=squatter.getsockname()[1])
        with pytest.raises(BrokerStartError, match="Address already in use"):
            proc.start()
        assert proc.proc is None
        proc.close()
