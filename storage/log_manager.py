"""All partition logs of one data directory (Kafka's LogManager).

Data-dir files: ``recovery-point-offset-checkpoint`` and ``log-start-offset-checkpoint`` (Kafka's text
format, see ``checkpoint``), ``replication-offset-checkpoint`` (the high watermarks, written on request by a broker
that replicates: ``checkpoint_high_watermarks``), and the clean-shutdown marker ``.kafka_cleanshutdown``, which
``close`` writes and ``load`` removes once every log is open (so a crash after ``load`` means the next start
recovers).
Checkpoints are written one at a time, whichever thread writes them, each with the offsets of that moment; a log
start offset raised by ``advance_log_start_offsets`` is in the file before it is in the log.
Partition directories are ``<topic>-<partition>``; other entries are ignored, except
``*-delete`` directories (a topic deletion interrupted by a crash), which are removed. A partition directory records
its topic's id in ``partition.metadata`` (``storage.partition_metadata``) when its log is created with one; ``load``
given the topics' current ids removes a directory recording another id, or a topic that no longer exists (the
leftover of a deleted topic, whose deletion a crash cut short), instead of opening it as the log of a topic recreated
under the same name; it records the current id in a directory that has none yet.

Threads: the set of open logs (``_logs``) is changed by one owner thread only -- the one that calls ``load``,
``create``, ``register`` and ``delete_topic`` (the broker's event loop once it serves; its loading thread before).
Other threads never see it half-changed: ``open_new`` builds a log without touching it, so the owner can build
logs in a worker thread and ``register`` them itself, and the readers that may run in another thread
(``all_logs``, ``checkpoint``, ``flush_and_checkpoint``) first copy it in one call (atomic in CPython).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import threading
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path

from oncelog.storage.checkpoint import (
    atomic_write,
    fsync_dir,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import KafkaStorageError, StorageError
from oncelog.storage.log import PartitionLog, parse_log_dir_name
from oncelog.storage.partition_metadata import read_topic_id, record_topic_id
from oncelog.storage.segment import is_segment_log_name

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"  # LogManager.RecoveryPointCheckpointFile
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"  # LogManager.LogStartOffsetCheckpointFile
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"  # ReplicaManager.HighWatermarkFilename
CLEAN_SHUTDOWN_MARKER = ".kafka_cleanshutdown"  # LogLoader.CleanShutdownFile
DELETE_DIR_SUFFIX = "-delete"


class LogManager:
    """Opens, creates, deletes and checkpoints the partition logs under ``data_dir``."""

    def __init__(self, data_dir: Path, default_config: LogConfig) -> None:
        self.data_dir = Path(data_dir)
        self.default_config = default_config
        self._logs: dict[tuple[str, int], PartitionLog] = {}
        self.loaded_clean = False
        #: The directories ``load`` removed as another topic's (recorded another topic id): the caller logs them.
        self.strays_removed: list[Path] = []
        #: Held while a checkpoint is written: the periodic one runs in a worker thread.
        self._checkpoint_lock = threading.Lock()

    def load(
        self,
        now_ms: int,
        config_for: Callable[[str], LogConfig] | None = None,
        topic_id_for: Callable[[str], uuid.UUID | None] | None = None,
    ) -> None:
        """Open every partition directory (recovering unless the clean-shutdown marker is present), each log with
        ``config_for(topic)`` (default: the manager's default config). With ``topic_id_for`` (a topic's current id,
        None for a topic that does not exist): a directory recording another topic id is removed unopened (listed in
        ``strays_removed``), and one recording none gets the topic's id."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        marker = self.data_dir / CLEAN_SHUTDOWN_MARKER
        clean = marker.exists()
        self.loaded_clean = clean
        recovery_points = read_offset_checkpoint(self.data_dir / RECOVERY_POINT_CHECKPOINT)
        start_offsets = read_offset_checkpoint(self.data_dir / LOG_START_OFFSET_CHECKPOINT)
        for path in sorted(self.data_dir.iterdir()):
            if not path.is_dir():
                continue
            if path.name.endswith(DELETE_DIR_SUFFIX):
                shutil.rmtree(path, ignore_errors=True)
                continue
            try:
                key = parse_log_dir_name(path.name)
            except ValueError:
                continue
            if topic_id_for is not None and not self._belongs(path, topic_id_for(key[0])):
                continue
            self._logs[key] = PartitionLog.open(
                path,
                config_for(key[0]) if config_for is not None else self.default_config,
                recovery_point=recovery_points.get(key, 0),
                log_start_offset=start_offsets.get(key, 0),
                clean_shutdown=clean,
                now_ms=now_ms,
            )
        if clean:
            marker.unlink()
            fsync_dir(self.data_dir)

    def _belongs(self, path: Path, topic_id: uuid.UUID | None) -> bool:
        """False (and the directory removed) when ``path`` records a topic id other than ``topic_id``; True
        otherwise, with ``topic_id`` recorded in a directory that records none."""
        recorded = read_topic_id(path)
        if recorded is None:
            if topic_id is not None:
                record_topic_id(path, topic_id)
            return True
        if recorded == topic_id:
            return True
        self.strays_removed.append(path)
        doomed = path.with_name(path.name + "." + "x" + DELETE_DIR_SUFFIX)
        path.rename(doomed)
        fsync_dir(self.data_dir)
        shutil.rmtree(doomed, ignore_errors=True)
        return False

    def segments_on_disk(self) -> dict[tuple[str, int], int]:
        """Per partition directory in the data dir, how many segments (``.log`` files) ``load`` will open; read
        before loading, to check the process has the descriptors for them."""
        counts: dict[tuple[str, int], int] = {}
        if not self.data_dir.is_dir():
            return counts
        for path in self.data_dir.iterdir():
            if not path.is_dir() or path.name.endswith(DELETE_DIR_SUFFIX):
                continue
            try:
                key = parse_log_dir_name(path.name)
            except ValueError:
                continue
            counts[key] = sum(1 for name in os.listdir(path) if is_segment_log_name(name))
        return counts

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def create(
        self, topic: str, partition: int, config: LogConfig | None = None, topic_id: uuid.UUID | None = None
    ) -> PartitionLog:
        """Return the partition's log, creating its directory when it does not exist yet (owner thread only)."""
        log = self._logs.get((topic, partition))
        if log is None:
            log = self.register(self.open_new(topic, partition, config, topic_id))
        return log

    def open_new(
        self, topic: str, partition: int, config: LogConfig | None = None, topic_id: uuid.UUID | None = None
    ) -> PartitionLog:
        """Open the partition's log, creating its directory and first segment when missing, WITHOUT making it one of
        the manager's logs (``register`` does that); ``topic_id`` is recorded in its directory (InconsistentTopicIdError
        when the directory records another). Touches no state of the manager, so any thread may call it; a log opened
        so must be registered or closed."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        directory = self.data_dir / f"{topic}-{partition}"
        if topic_id is not None:
            if directory.exists():
                record_topic_id(directory, topic_id)  # refuses another topic's directory before opening it
            else:
                # Recorded before the first segment, whose directory fsync makes the record durable with it: one
                # file fsync more per new log, not two.
                directory.mkdir()
                record_topic_id(directory, topic_id, sync_dir=False)
                fsync_dir(self.data_dir)
        return PartitionLog.open(directory, config or self.default_config)

    def register(self, log: PartitionLog) -> PartitionLog:
        """Make ``log`` (from ``open_new``) one of the manager's logs (owner thread only). Raises ValueError when its
        partition already has a log."""
        key = (log.topic, log.partition)
        if key in self._logs:
            raise ValueError(f"{log.topic}-{log.partition} already has a log")
        self._logs[key] = log
        return log

    def delete_topic(self, topic: str) -> None:
        """Delete every partition log of ``topic`` and rewrite the checkpoints."""
        for key in [k for k in self._logs if k[0] == topic]:
            log = self._logs.pop(key)
            for segment in log.segments:
                segment.close()
            # Rename first so a crash mid-delete leaves a "-delete" directory that load() removes.
            doomed = log.directory.with_name(log.directory.name + "." + "x" + DELETE_DIR_SUFFIX)
            with contextlib.suppress(FileNotFoundError):
                log.directory.rename(doomed)
                fsync_dir(self.data_dir)
                shutil.rmtree(doomed, ignore_errors=True)
        self.checkpoint()

    def all_logs(self) -> dict[tuple[str, int], PartitionLog]:
        """A copy of the open logs, taken in one call: safe from any thread."""
        return dict(self._logs)

    def flush_and_checkpoint(self) -> list[Exception]:
        """fsync every log fully (data and indexes), then checkpoint the advanced recovery points.

        I/O failures (a full disk, EIO) do not stop it: a log that cannot be flushed keeps its recovery point, a
        checkpoint that cannot be written keeps its previous content, and the failures are returned (empty list:
        everything done). Running it again later retries.
        """
        failures: list[Exception] = []
        for log in self.all_logs().values():
            try:
                log.flush()
            except (OSError, StorageError) as exc:
                failures.append(exc)
        try:
            self.checkpoint()
        except (OSError, StorageError) as exc:
            failures.append(exc)
        return failures

    def checkpoint(self) -> None:
        """Atomically write the recovery-point and log-start-offset checkpoints of every log."""
        with self._checkpoint_lock:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            logs = self.all_logs()
            write_offset_checkpoint(
                self.data_dir / RECOVERY_POINT_CHECKPOINT, {k: log.recovery_point for k, log in logs.items()}
            )
            write_offset_checkpoint(
                self.data_dir / LOG_START_OFFSET_CHECKPOINT, {k: log.log_start_offset for k, log in logs.items()}
            )

    def checkpoint_high_watermarks(self) -> None:
        """Atomically write every log's high watermark to ``replication-offset-checkpoint`` (Kafka writes it every
        ``replica.high.watermark.checkpoint.interval.ms`` and at shutdown)."""
        with self._checkpoint_lock:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            logs = self.all_logs()
            write_offset_checkpoint(
                self.data_dir / REPLICATION_OFFSET_CHECKPOINT, {k: log.high_watermark for k, log in logs.items()}
            )

    def checkpointed_high_watermarks(self) -> dict[tuple[str, int], int]:
        """The high watermarks ``checkpoint_high_watermarks`` last wrote (none when it never did). Raises
        StorageError when the file is malformed."""
        return read_offset_checkpoint(self.data_dir / REPLICATION_OFFSET_CHECKPOINT)

    def advance_log_start_offsets(self, targets: Mapping[tuple[str, int], int]) -> None:
        """Raise the start offset of each log named in ``targets`` (each an open log) to its offset, durably: the
        log-start-offset checkpoint holding the new offsets is written and fsynced before any log changes (see
        ``PartitionLog.advance_log_start_offset``). A target at or below a log's start offset leaves it as it is.

        Raises OffsetOutOfRangeError for a target above its log's high watermark (or negative), and
        KafkaStorageError when the checkpoint cannot be written (a full disk); either way nothing changes.
        """
        with self._checkpoint_lock:
            logs = {key: self._logs[key] for key in targets}
            for key, offset in targets.items():
                logs[key].check_log_start_offset(offset)
            raised = {key: offset for key, offset in targets.items() if offset > logs[key].log_start_offset}
            if not raised:
                return
            starts = {key: log.log_start_offset for key, log in self._logs.items()}
            try:
                write_offset_checkpoint(self.data_dir / LOG_START_OFFSET_CHECKPOINT, starts | raised)
            except OSError as exc:
                raise KafkaStorageError(f"cannot write {LOG_START_OFFSET_CHECKPOINT}: {exc}") from exc
            for key, offset in raised.items():
                logs[key].advance_log_start_offset(offset)

    def close(self) -> None:
        """Flush and close every log, write the checkpoints, then the clean-shutdown marker."""
        for log in self._logs.values():
            log.close()
        self.checkpoint()
        atomic_write(self.data_dir / CLEAN_SHUTDOWN_MARKER, b"")
