"""The broker's compaction task: every ``log.cleaner.backoff.ms``, a ``storage.cleaner`` pass over each log whose
cleanup.policy holds "compact" and that closed a segment since its last pass, in a worker thread.

Guaranteed: a pass never overlaps another or the retention sweep (both hold the node's housekeeping lock), and its
result is installed in the same shielded step, so a stopping broker never leaves the files and the segment list
apart. A failed pass is logged and tried again at the next look; the broker keeps serving.
"""

from __future__ import annotations

import functools

import structlog
import trio
from oncelog.broker.clock import now_ms
from oncelog.storage.cleaner import CompactionPass, clean_log
from oncelog.storage.errors import StorageError
from oncelog.storage.log import PartitionLog
from oncelog.storage.log_manager import LogManager

log = structlog.get_logger(__name__)


class LogCompactor:
    """Compacts the node's compacted logs; run ``run`` in the node's nursery."""

    def __init__(self, logs: LogManager, housekeeping: trio.Lock, backoff_ms: int) -> None:
        self._logs = logs
        self._housekeeping = housekeeping
        self._backoff_s = backoff_ms / 1000
        #: Per log, the end of the range its last pass covered (0: none yet, e.g. after a restart).
        self._first_dirty: dict[PartitionLog, int] = {}

    async def run(self) -> None:
        while True:
            await trio.sleep(self._backoff_s)
            await self.compact_all()

    async def compact_all(self) -> None:
        """One pass over every compacted log, one log at a time."""
        compacted = [p for p in self._logs.all_logs().values() if p.config.compacts]
        self._first_dirty = {p: self._first_dirty.get(p, 0) for p in compacted}  # deleted logs are forgotten
        for partition_log in compacted:
            async with self._housekeeping:
                await self._compact(partition_log)

    async def _compact(self, partition_log: PartitionLog) -> None:
        done = await self._pass(partition_log, self._first_dirty[partition_log])
        if done is not None and done.groups:
            # Groups are sized by what their segments held before the pass: merge what it shrank right away.
            await self._pass(partition_log, first_dirty=0)

    async def _pass(self, partition_log: PartitionLog, first_dirty: int) -> CompactionPass | None:
        """One pass, installed; None when it failed (logged)."""
        clean = functools.partial(
            clean_log,
            list(partition_log.segments),
            partition_log.high_watermark,
            partition_log.config,
            now_ms=now_ms(),
            first_dirty=first_dirty,
        )
        failure: Exception | None = None
        with trio.CancelScope(shield=True):
            try:
                done = await trio.to_thread.run_sync(clean)
            except (OSError, StorageError) as exc:
                done, failure = None, exc
            current = self._logs.get(partition_log.topic, partition_log.partition) is partition_log
            for group in done.groups if done is not None else ():
                if not current:  # deleted meanwhile
                    group.new.close()
                    continue
                try:
                    partition_log.replace_segments(group)
                except StorageError as exc:
                    failure = exc
        if failure is not None or done is None:
            log.error(
                "compaction_failed", topic=partition_log.topic, partition=partition_log.partition, error=str(failure)
            )
            return None
        self._first_dirty[partition_log] = max(done.end, self._first_dirty.get(partition_log, 0))
        if done.groups:
            log.info(
                "compacted",
                topic=partition_log.topic,
                partition=partition_log.partition,
                segments=sum(len(g.old) for g in done.groups),
                into=len(done.groups),
                records_removed=sum(g.records_removed for g in done.groups),
            )
        return done
