"""The runtime floors of bench/runtime.py and the P3/P4 arithmetic of bench/run.py.

The figures themselves vary by machine; these tests check that each measurement really runs (a server process that
answers, sync threads that return every job) and that the P4 floor is computed from the figures it names.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench import machine, run, runtime, txn_bench  # noqa: E402


def test_echo_measures_a_real_server() -> None:
    # echo() raises unless every request came back byte for byte.
    rtt_us, cpu_us, cpu_concurrent_us = runtime.echo(requests=300, concurrency=3)
    assert 0 < rtt_us < 1_000_000
    # The server is another process: its CPU is measured from /proc, at tick (10 ms) resolution.
    assert cpu_us >= 0 and cpu_concurrent_us >= 0


def test_handoff_returns_every_job() -> None:
    # handoff() returns only once every job has come back from the helper.
    p50_us, cpu_us, cpu_concurrent_us = runtime.handoff(jobs=400, concurrency=4)
    assert 0 < p50_us < 1_000_000
    # Part of the CPU is the helper's, read from /proc at tick (10 ms) resolution: 400 jobs may round to 0.
    assert cpu_us >= 0 and cpu_concurrent_us >= 0


def test_p4_floors_the_mock_p50_plus_serial_fsyncs_and_the_cpu_left_at_the_goal_rate(monkeypatch) -> None:
    r = run.Run(run.QUICK)
    mock = run.P4Result(latencies_ms=[1.0, 1.2, 1.4], commits=100, seconds=1.0, broker_cpu_s=None, client_cpu_s=0.03)
    assert run.p4_floors(r, mock) == {}  # no machine figures, no floor
    r.disk = machine.DiskFigures(
        1, 1.0, 1.0, 1.0, 1.0, fdatasync_p50_ms=0.15, fdatasync_p99_ms=0.3, fdatasync_cpu_us=50.0
    )
    r.runtime = runtime.RuntimeFigures(
        60.0, 50.0, 16.0, handoff_p50_us=100.0, handoff_cpu_us=70.0, handoff_cpu_concurrent_us=15.0
    )
    monkeypatch.setattr(run.os, "sched_getaffinity", lambda _pid: {0, 1})
    floors = run.p4_floors(r, mock)
    assert floors["commit_p50_floor_ms"] == pytest.approx(1.2 + 4 * (0.15 + 0.1))
    assert floors["runtime_cpu_us_per_commit"] == pytest.approx(3 * 16.0 + 4 * 15.0)
    # 2 cores at 3,000 commits/s: 667 us per commit, less the clients' 300 us and the kernel's 4 x 50 us.
    assert floors["client_cpu_us_per_commit_mock"] == pytest.approx(300.0)
    assert floors["fdatasync_cpu_us_per_commit"] == pytest.approx(200.0)
    assert floors["broker_cpu_budget_us_per_commit"] == pytest.approx(2e6 / 3000 - 300.0 - 200.0)


def test_p3_ceiling_adds_the_serial_fsyncs_to_the_clients_own_pause_per_commit_interval() -> None:
    r = run.Run(run.QUICK)
    assert run.p3_ceiling(r, 1.0) is None  # no machine figures, no ceiling
    r.disk = machine.DiskFigures(
        1, 1.0, 1.0, 1.0, 1.0, fdatasync_p50_ms=0.2, fdatasync_p99_ms=0.3, fdatasync_cpu_us=50.0
    )
    r.runtime = runtime.RuntimeFigures(
        60.0, 50.0, 16.0, handoff_p50_us=50.0, handoff_cpu_us=70.0, handoff_cpu_concurrent_us=15.0
    )
    # The client's own 1.25 ms and three fsyncs of 0.25 ms pause the producer 2 ms per 100 ms of sending.
    assert run.p3_ceiling(r, 1.25) == pytest.approx(100 / 102)


def test_io_full_stall_reads_the_full_line_of_psi() -> None:
    text = (
        "some avg10=6.91 avg60=33.82 avg300=17.74 total=2150434020\n"
        "full avg10=6.78 avg60=33.38 avg300=16.71 total=1668580947\n"
    )
    assert machine.io_full_stall_us(text) == 1668580947
    assert machine.io_full_stall_us("some avg10=0.00 avg60=0.00 avg300=0.00 total=5\n") is None
    live = machine.io_full_stall_us()
    assert live is None or live >= 0


def test_p3_ratio_splits_into_sending_pace_and_commit_pauses() -> None:
    # 1,000 records: idempotent in 1.0 s; transactional in 1.25 s, of which 0.05 s flushing and 0.2 s in EndTxn.
    txn = txn_bench.TransactionalRun(1.25, flush_s=(0.02, 0.03), end_s=(0.1, 0.1))
    p3 = run.P3Result(1000, idempotent_s=1.0, transactional=txn)
    assert txn.commits == 2
    assert txn.sending_s == pytest.approx(1.0)
    assert p3.ratio == pytest.approx(0.8)
    assert p3.sending_factor == pytest.approx(1.0)
    assert p3.paused_share == pytest.approx(0.2)
    assert p3.ratio == pytest.approx(p3.sending_factor * (1 - p3.paused_share))
    assert p3.pause_p50_ms() == pytest.approx((25.0, 100.0))
    assert p3.commit_pause_p50_ms == pytest.approx(125.0)
