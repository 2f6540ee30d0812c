"""The benchmark suite's result lines: one figure, its goal, whether it is met, and what it is paired with.

Every figure of ``bench/run.py`` is a ``Line``; ``GOALS`` holds the issue's goals by JSON key. Guaranteed:
``met`` is None exactly when the line has no goal or no value; ``to_json`` has every key of ``GOALS`` (null when
that benchmark did not run).
"""

from __future__ import annotations

from dataclasses import dataclass

#: JSON key -> (comparison, goal). ">=" means higher is better.
GOALS: dict[str, tuple[str, float]] = {
    "P1_produce_ratio_vs_mock": (">=", 1.0),
    "P1_broker_cpu_s_per_million": ("", 0.0),
    "P1_produce_ratio_vs_kafka": ("", 0.0),  # context (issue 30): Apache Kafka, fsync per append as oncelog
    "P2_mb_s_pagecache": (">=", 1000.0),
    "P2_mb_s_fsync": (">=", 600.0),
    "P2_kafka_mb_s_pagecache": ("", 0.0),  # context (issue 30): Apache Kafka, same pump, same mode
    "P2_kafka_mb_s_fsync": ("", 0.0),
    "P3_txn_vs_idempotent": (">=", 0.98),
    "P3_kafka_txn_vs_idempotent": ("", 0.0),  # context (issue 30)
    "P4_commit_p50_ms": ("<=", 2.0),
    "P4_commit_p99_ms": ("<=", 10.0),
    "P4_commits_per_s": (">=", 3000.0),
    "P4_pagecache_commit_p50_ms": ("", 0.0),  # context: the same transactions without fsyncs
    "P4_broker_cpu_budget_us_per_commit": ("", 0.0),  # context: the CPU left per commit at the goal rate
    "P4_kafka_commit_p50_ms": ("", 0.0),  # context (issue 30): Apache Kafka, fsync per append as oncelog
    "P4_kafka_commit_p99_ms": ("", 0.0),
    "P4_kafka_commits_per_s": ("", 0.0),
    "P4_kafka_pagecache_commit_p50_ms": ("", 0.0),
    "P5_e2e_p50_ms": ("<=", 2.0),
    "P5_e2e_p99_ms": ("<=", 10.0),
    "P5_kafka_e2e_p50_ms": ("", 0.0),  # context (issue 30)
    "P5_kafka_e2e_p99_ms": ("", 0.0),
    "P6_consume_ratio_vs_mock": (">=", 1.0),
    "P6_consume_ratio_vs_kafka": ("", 0.0),  # context (issue 30)
    "P7_restart_s": ("<=", 5.0),
    "P7_kafka_restart_s": ("", 0.0),  # context (issue 30): Apache Kafka, the same fill
    "P9_throughput_ratio_1000_vs_1": (">=", 0.8),
    "P9_pagecache_throughput_ratio": ("", 0.0),  # context: the same without an fsync per request
    "P9_kafka_throughput_ratio_1000_vs_1": ("", 0.0),  # context (issue 30): Apache Kafka, fsync per append
    "P9_idle_kb_per_partition": ("<=", 100.0),
    "C1_rf3_vs_rf1_acks_all": (">=", 0.7),
    "C2_failover_p50_s": ("<=", 3.0),
    "C3_controlled_shutdown_pause_s": ("<=", 0.5),
    "C4_txn_coordinator_failover_p50_s": ("<=", 3.0),  # issue 25
    "C5_txn_rf3_vs_rf1": (">=", 0.7),  # issue 25
    "C5_txn_rf3_vs_rf1_kafka_order": ("", 0.0),  # context: oncelog with transaction.marker.wait.ms=0
    "P10_delay_forward_rec_s": (">=", 50000.0),  # issue 26
    "P10_delay_lateness_p99_ms": ("<=", 1000.0),  # issue 26: at 10,000 delayed records/s
    "S1_spark_batch_read_rec_s": (">=", 300000.0),  # issue 27
    "S1_spark_copy_rec_s": (">=", 100000.0),  # issue 27: exactly-once streaming copy
    "B1_client_vs_aiokafka": (">=", 1.0),  # issue 27: the bundled client's lowest records/s ratio to aiokafka's
}


@dataclass(frozen=True)
class Line:
    """One printed figure. ``key`` is its JSON key (None for context figures that have no goal)."""

    bench: str  # "P1" .. "P10", or "machine"
    label: str
    value: float | None
    spec: str  # format spec of the value, e.g. ".3f"
    beside: str = ""  # the peer / limit measured in the same run
    key: str | None = None

    @property
    def goal(self) -> str:
        if self.key is None or not GOALS[self.key][0]:
            return ""
        op, goal = GOALS[self.key]
        return f"{op} {goal:,g}"

    @property
    def met(self) -> bool | None:
        if self.key is None or self.value is None or not GOALS[self.key][0]:
            return None
        op, goal = GOALS[self.key]
        return self.value >= goal if op == ">=" else self.value <= goal


def fmt(value: float | None, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def table(lines: list[Line]) -> str:
    """A fixed-width table: bench, figure, value, goal, met/miss, and the paired figures."""
    out = [f"{'':<8}{'figure':<46}{'value':>12}  {'goal':<10}{'':<6}beside it (same run)"]
    for ln in lines:
        verdict = "" if ln.met is None else ("met" if ln.met else "MISS")
        out.append(
            f"{ln.bench:<8}{ln.label:<46}{fmt(ln.value, ln.spec):>12}  {ln.goal:<10}{verdict:<6}{ln.beside}".rstrip()
        )
    return "\n".join(out)


def to_json(lines: list[Line]) -> dict[str, float | None]:
    """Every GOALS key -> its value in ``lines`` (None when absent)."""
    values: dict[str, float | None] = dict.fromkeys(GOALS)
    for ln in lines:
        if ln.key is not None:
            values[ln.key] = ln.value
    return values
