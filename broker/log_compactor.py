"""The broker's compaction task: every ``log.cleaner.backoff.ms``, a compaction pass over each log whose
cleanup.policy holds "compact" and that closed a segment since its last pass. The policy is read at every look, so a
topic switched to or from compaction (AlterConfigs) is picked up or left alone from the next look on.

The pass itself (``storage.cleaner``) runs in a child process (``storage.cleaner_process``), so that decoding every
record of the range never holds this process's GIL; the broker then opens the new segments in a worker thread and
installs them. Guaranteed: a pass never overlaps another or the retention sweep (both hold the node's housekeeping
lock). A failed pass is logged and its log is not compacted again until the broker restarts; the broker keeps
serving. A child that died part-way may leave a durable swap: the broker completes and installs it before the lock
goes, so retention never deletes segments that a later load would bring back. A broker stopped during a pass kills
the child: the files are then as a crash leaves them, and the next load sorts them out.
"""

from __future__ import annotations

import json
import subprocess
import sys

import structlog
import trio
from oncelog.broker.clock import now_ms
from oncelog.storage.cleaner import CleanedGroup, compaction_range, finish_interrupted, open_cleaned
from oncelog.storage.cleaner_process import job_for
from oncelog.storage.errors import StorageError
from oncelog.storage.log import PartitionLog
from oncelog.storage.log_manager import LogManager

log = structlog.get_logger(__name__)

_CHILD = [sys.executable, "-m", "oncelog.storage.cleaner_process"]


class CompactionFailed(Exception):
    """A pass did not complete; its log is left alone until the next start."""


class LogCompactor:
    """Compacts the node's compacted logs; run ``run`` in the node's nursery."""

    def __init__(self, logs: LogManager, housekeeping: trio.Lock, backoff_ms: int) -> None:
        self._logs = logs
        self._housekeeping = housekeeping
        #: log.cleaner.backoff.ms; dynamic: the next pause uses the value set.
        self.backoff_ms = backoff_ms
        #: Per log, the end of the range its last pass covered (0: none yet, e.g. after a restart).
        self._first_dirty: dict[PartitionLog, int] = {}
        self._failed: set[PartitionLog] = set()

    async def run(self) -> None:
        while True:
            await trio.sleep(self.backoff_ms / 1000)
            await self.compact_all()

    async def compact_all(self) -> None:
        """One look at every compacted log, one log at a time."""
        compacted = [p for p in self._logs.all_logs().values() if p.config.compacts and p not in self._failed]
        self._first_dirty = {p: self._first_dirty.get(p, 0) for p in compacted}  # deleted logs are forgotten
        for partition_log in compacted:
            async with self._housekeeping:
                try:
                    await self._pass(partition_log, self._first_dirty[partition_log])
                except (CompactionFailed, OSError, StorageError) as exc:
                    self._failed.add(partition_log)
                    log.error(
                        "compaction_failed",
                        topic=partition_log.topic,
                        partition=partition_log.partition,
                        error=str(exc),
                    )

    async def _pass(self, partition_log: PartitionLog, first_dirty: int) -> None:
        """One pass, installed."""
        segments = list(partition_log.segments)
        found = compaction_range(segments, partition_log.last_stable_offset, first_dirty)
        if found is None:
            return
        cleanable, end = found
        bases = [s.base_offset for s in cleanable]
        config = partition_log.config  # one config for the whole pass, though AlterConfigs may change it meanwhile
        transactions = partition_log.compaction_transactions(end)
        job = job_for(partition_log.directory, bases, end, now_ms(), config, transactions)
        child = await trio.run_process(_CHILD, stdin=job, capture_stdout=True, capture_stderr=True, check=False)
        try:
            if child.returncode != 0:
                stderr = child.stderr.decode(errors="replace").strip()[-2000:]
                raise CompactionFailed(stderr or f"the compaction process exited with status {child.returncode}")
            report = _report(child)
        except CompactionFailed:
            # The child may have died after swapping in some groups, or inside a swap: finish and install them
            # now, or retention could delete by path files that are no longer those segments' (or that the next
            # load would bring back from a swap file).
            finished = await trio.to_thread.run_sync(finish_interrupted, cleanable, end)
            groups = await trio.to_thread.run_sync(open_cleaned, cleanable, finished, config)
            self._install(partition_log, groups)
            raise
        reported = [tuple(group) for group in report["groups"]]
        groups = await trio.to_thread.run_sync(open_cleaned, cleanable, reported, config)
        self._install(partition_log, groups)
        if report.get("error"):
            raise CompactionFailed(f"stopped after {len(groups)} groups: {report['error']}")
        self._first_dirty[partition_log] = end
        if groups:
            log.info(
                "compacted",
                topic=partition_log.topic,
                partition=partition_log.partition,
                segments=sum(len(g.old) for g in groups),
                into=len(groups),
                records_removed=sum(g.records_removed for g in groups),
            )

    def _install(self, partition_log: PartitionLog, groups: list[CleanedGroup]) -> None:
        if self._logs.get(partition_log.topic, partition_log.partition) is not partition_log:  # deleted meanwhile
            for group in groups:
                group.new.close()
            return
        for i, group in enumerate(groups):
            try:
                partition_log.replace_segments(group)
            except StorageError:
                for rest in groups[i:]:
                    rest.new.close()
                raise


def _report(child: subprocess.CompletedProcess[bytes]) -> dict:
    try:
        report = json.loads(child.stdout)
    except ValueError as exc:
        raise CompactionFailed(f"unreadable report from the compaction process: {exc}") from None
    if not isinstance(report, dict) or not isinstance(report.get("groups"), list):
        raise CompactionFailed(f"unreadable report from the compaction process: {report!r:.200}")
    return report
