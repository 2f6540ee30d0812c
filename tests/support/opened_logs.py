"""Logs and log managers opened for one test, every descriptor they hold closed at its end (``tests/storage``'s
``logs`` fixture)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from oncelog.storage.config import LogConfig
from oncelog.storage.log import PartitionLog
from oncelog.storage.log_manager import LogManager

from .killed_log import crash


class OpenedLogs:
    """Opens logs and log managers for one test; ``close_all`` closes every descriptor they hold, without flushing
    or writing anything (as ``support.killed_log.crash``), so a test may leave a log crashed or failing."""

    def __init__(self) -> None:
        self._logs: list[PartitionLog] = []
        self._managers: list[LogManager] = []

    def open(self, directory: Path, config: LogConfig, **kw: Any) -> PartitionLog:
        """``PartitionLog.open``, closed at the test's end."""
        log = PartitionLog.open(directory, config, **kw)
        self._logs.append(log)
        return log

    def manager(self, data_dir: Path, config: LogConfig, **kw: Any) -> LogManager:
        """A ``LogManager``, its logs closed at the test's end."""
        manager = LogManager(data_dir, config, **kw)
        self._managers.append(manager)
        return manager

    def close_all(self) -> None:
        for manager in self._managers:
            self._logs.extend(manager.all_logs().values())
        for log in self._logs:
            crash(log)
