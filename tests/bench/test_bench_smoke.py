"""Smoke test of the benchmark harness: one tiny configuration of bench/run.py must run and write every JSON key.

Runs ``bench/run.py --only P1 --records 20000`` (a real broker subprocess, librdkafka's mock cluster and Apache Kafka:
the test run's shared ``kafka_peer``, ``tests/conftest.py``, handed over with ``--kafka-bootstrap``) and checks that the
JSON has every figure key (the issues' 16, the cluster's 5 and the Kafka columns), that P1's are positive numbers, and
that the benchmarks not run are null. It keeps the harness working; it says nothing about the figures.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.kafka_peer import KafkaPeer

ROOT = Path(__file__).resolve().parents[2]
RUN_PY = ROOT / "bench" / "run.py"
KEYS = {
    "P1_produce_ratio_vs_mock",
    "P1_broker_cpu_s_per_million",
    "P1_produce_ratio_vs_kafka",
    "P2_kafka_mb_s_pagecache",
    "P2_kafka_mb_s_fsync",
    "P3_kafka_txn_vs_idempotent",
    "P5_kafka_e2e_p50_ms",
    "P5_kafka_e2e_p99_ms",
    "P6_consume_ratio_vs_kafka",
    "P4_kafka_commit_p50_ms",
    "P4_kafka_commit_p99_ms",
    "P4_kafka_commits_per_s",
    "P4_kafka_pagecache_commit_p50_ms",
    "P7_kafka_restart_s",
    "P9_kafka_throughput_ratio_1000_vs_1",
    "P2_mb_s_pagecache",
    "P2_mb_s_fsync",
    "P3_txn_vs_idempotent",
    "P4_commit_p50_ms",
    "P4_commit_p99_ms",
    "P4_commits_per_s",
    "P5_e2e_p50_ms",
    "P5_e2e_p99_ms",
    "P6_consume_ratio_vs_mock",
    "P7_restart_s",
    "P9_throughput_ratio_1000_vs_1",
    "P9_idle_kb_per_partition",
    "C1_rf3_vs_rf1_acks_all",
    "C2_failover_p50_s",
    "C3_controlled_shutdown_pause_s",
    "P10_delay_forward_rec_s",
    "P10_delay_lateness_p99_ms",
}


def test_run_py_p1_writes_every_json_key(tmp_path: Path, kafka_peer: KafkaPeer) -> None:
    out = tmp_path / "bench.json"
    argv = ["--only", "P1", "--records", "20000", "--json", str(out), "--kafka-bootstrap", kafka_peer.bootstrap]
    proc = subprocess.run([sys.executable, str(RUN_PY), *argv], cwd=ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert doc.keys() >= KEYS
    assert doc["P1_produce_ratio_vs_mock"] > 0
    assert doc["P1_broker_cpu_s_per_million"] > 0
    assert doc["P1_produce_ratio_vs_kafka"] > 0
    assert len(doc["details"]["P1"]["kafka_s"]) == doc["meta"]["sizes"]["rounds"]
    assert all(doc[k] is None for k in KEYS if not k.startswith("P1_"))
    assert doc["meta"]["only"] == ["P1"]
    assert len(doc["details"]["P1"]["oncelog_s"]) == doc["meta"]["sizes"]["rounds"]
    # The table names P1's goal and a verdict.
    assert "produce rec/s oncelog / mock" in proc.stdout
    assert "produce rec/s oncelog / Kafka (fsync/append)" in proc.stdout
    assert ">= 1" in proc.stdout
    assert " met " in proc.stdout or " MISS " in proc.stdout


def test_run_py_rejects_unknown_benchmark() -> None:
    proc = subprocess.run(
        [sys.executable, str(RUN_PY), "--only", "P8"], cwd=ROOT, capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 2
    assert "unknown benchmarks ['P8']" in proc.stderr
