"""A compaction pass in a process of its own: ``python -m oncelog.storage.cleaner_process`` reads one job (JSON) on
stdin, runs ``storage.cleaner.clean_range`` over the segments it names and writes a report (JSON) on stdout.

A pass decodes every record of the range, which in a thread of the broker would hold the GIL against its event
loop for seconds; here it costs the broker nothing but the wait.

Job: ``directory``, ``bases`` (the cleanable segments' base offsets, oldest first), ``end`` (the base offset after
them), ``now_ms``, ``config`` (the log's ``LogConfig`` fields), ``aborted`` and ``last_batches`` (the log's
``compaction_plan.LogTransactions``) and ``parent``. Report: ``groups``, one ``[base,
upper, records removed]`` per group rewritten, and ``error`` (None, or why the pass stopped after those groups); the
broker opens the new segments itself (``cleaner.open_cleaned``).

Guaranteed: it refuses (exit 1, the reason on stderr) when a segment file named in the job is missing or an
interrupted compaction is pending: it never creates a segment nor touches files its broker does not expect. It
stops before each swap once its broker (``parent`` in the job) is gone, so that a broker killed and started again
does not load a directory this process is still changing; past that check a swap takes milliseconds, and the next
load completes one it finds.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path

from oncelog.storage.cleaner import CompactionInterrupted, clean_range, pending_swaps
from oncelog.storage.compaction_plan import LogTransactions
from oncelog.storage.config import LogConfig
from oncelog.storage.segment import LOG_SUFFIX, LogSegment, file_name


def job_for(
    directory: Path, bases: list[int], end: int, now_ms: int, config: LogConfig, transactions: LogTransactions
) -> bytes:
    """The job text for a pass over the segments ``bases`` of ``directory``, asked by this process."""
    job = {
        "directory": str(directory),
        "bases": bases,
        "end": end,
        "now_ms": now_ms,
        "config": dataclasses.asdict(config),
        "aborted": list(transactions.aborted),
        "last_batches": [[pid, last, epoch] for pid, (last, epoch) in transactions.last_batches.items()],
        "parent": os.getpid(),
    }
    return json.dumps(job).encode()


def run(job: dict) -> dict:
    """Run one job (see the module docstring) and return its report."""
    directory = Path(job["directory"])
    fields = job["config"]
    config = LogConfig(**{**fields, "cleanup_policy": tuple(fields["cleanup_policy"])})
    if pending_swaps(directory):
        raise RuntimeError(f"{directory}: an interrupted compaction waits for the next load")
    missing = [b for b in job["bases"] if not (directory / file_name(b, LOG_SUFFIX)).exists()]
    if missing:
        raise RuntimeError(f"{directory}: no segment files at {missing}")
    segments = [LogSegment(directory, base, config) for base in job["bases"]]
    try:
        for segment in segments:
            segment.load()

        def broker_alive() -> bool:
            return os.getppid() == job["parent"]

        error = None
        try:
            transactions = LogTransactions(
                [tuple(txn) for txn in job["aborted"]],
                {pid: (last, epoch) for pid, last, epoch in job["last_batches"]},
            )
            groups = clean_range(
                segments,
                job["end"],
                config,
                now_ms=job["now_ms"],
                transactions=transactions,
                still_wanted=broker_alive,
            )
        except CompactionInterrupted as exc:  # the groups done are swapped in: the broker must install them
            groups, error = exc.done, str(exc)
        for group in groups:
            group.new.close()
    finally:
        for segment in segments:
            segment.close()
    return {"groups": [[g.new.base_offset, g.upper, g.records_removed] for g in groups], "error": error}


if __name__ == "__main__":
    try:
        report = run(json.loads(sys.stdin.buffer.read()))
    except Exception as exc:  # the broker logs it and leaves the log alone until its next start
        print(f"{type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(1)
    sys.stdout.write(json.dumps(report))
