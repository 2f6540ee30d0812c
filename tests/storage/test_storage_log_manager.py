"""LogManager: create/load/delete, checkpoints, clean-shutdown marker; atomic_write and checkpoint format."""

from __future__ import annotations

from pathlib import Path

import pytest
from oncelog.storage.checkpoint import atomic_write, read_offset_checkpoint, write_offset_checkpoint
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import StorageError
from oncelog.storage.log_manager import (
    CLEAN_SHUTDOWN_MARKER,
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
)
from support.opened_logs import OpenedLogs

from storage.batches import make_batch

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=200, retention_ms=-1)


def test_checkpoint_format_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    write_offset_checkpoint(path, {("a-b.c", 1): 5, ("a-b.c", 0): 7})
    assert path.read_text() == "0\n2\na-b.c 0 7\na-b.c 1 5\n"
    assert read_offset_checkpoint(path) == {("a-b.c", 0): 7, ("a-b.c", 1): 5}
    assert read_offset_checkpoint(tmp_path / "missing") == {}
    path.write_text("0\n3\nx 0 1\n")
    with pytest.raises(StorageError):
        read_offset_checkpoint(path)


def test_atomic_write_replaces_and_leaves_no_tmp(tmp_path: Path) -> None:
    atomic_write(tmp_path / "f", b"one")
    atomic_write(tmp_path / "f", b"two")
    assert (tmp_path / "f").read_bytes() == b"two"
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_clean_close_and_load(tmp_path: Path, logs: OpenedLogs) -> None:
    manager = logs.manager(tmp_path, CONFIG)
    manager.load(now_ms=0)
    a = manager.create("my-topic.v2_x", 0)
    b = manager.create("my-topic.v2_x", 1, LogConfig(segment_bytes=500))
    assert manager.create("my-topic.v2_x", 0) is a
    for i in range(30):
        a.append(make_batch(2, timestamp=i), now_ms=0)
    b.append(make_batch(1), now_ms=0)
    manager.close()
    assert (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {
        ("my-topic.v2_x", 0): 60,
        ("my-topic.v2_x", 1): 1,
    }

    again = logs.manager(tmp_path, CONFIG)
    again.load(now_ms=0)
    assert again.loaded_clean
    assert not (tmp_path / CLEAN_SHUTDOWN_MARKER).exists()
    assert set(again.all_logs()) == {("my-topic.v2_x", 0), ("my-topic.v2_x", 1)}
    log = again.get("my-topic.v2_x", 0)
    assert log is not None and log.log_end_offset == 60 and log.recovered_segments == 0
    assert again.get("nope", 0) is None


def test_crash_after_load_means_recovery(tmp_path: Path, logs: OpenedLogs) -> None:
    manager = logs.manager(tmp_path, CONFIG)
    manager.load(now_ms=0)
    log = manager.create("t", 0)
    for i in range(30):
        log.append(make_batch(2, timestamp=i), now_ms=0)
    log.flush(20)
    manager.checkpoint()
    for i in range(5):
        log.append(make_batch(2, timestamp=i), now_ms=0)
    # crash: no close, no marker
    again = logs.manager(tmp_path, CONFIG)
    again.load(now_ms=0)
    assert not again.loaded_clean
    reopened = again.get("t", 0)
    assert reopened is not None
    assert reopened.log_end_offset == 70
    assert reopened.recovered_segments == len(reopened.segments) - sum(
        1 for s in reopened.segments[1:] if s.base_offset <= 20
    )


def test_log_start_offset_checkpoint_survives_restart(tmp_path: Path, logs: OpenedLogs) -> None:
    manager = logs.manager(tmp_path, LogConfig(segment_bytes=1500, retention_bytes=2000, retention_ms=-1))
    manager.load(now_ms=0)
    log = manager.create("t", 0)
    for i in range(60):
        log.append(make_batch(2, timestamp=i), now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    assert log.enforce_retention(0) > 0
    start = log.log_start_offset
    manager.close()
    assert read_offset_checkpoint(tmp_path / LOG_START_OFFSET_CHECKPOINT) == {("t", 0): start}
    again = logs.manager(tmp_path, CONFIG)
    again.load(now_ms=0)
    assert again.get("t", 0).log_start_offset == start


def test_delete_topic(tmp_path: Path, logs: OpenedLogs) -> None:
    manager = logs.manager(tmp_path, CONFIG)
    manager.load(now_ms=0)
    for p in range(3):
        manager.create("gone", p).append(make_batch(1), now_ms=0)
    manager.create("gone-too", 0)
    manager.delete_topic("gone")
    assert set(manager.all_logs()) == {("gone-too", 0)}
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["gone-too-0"]
    assert read_offset_checkpoint(tmp_path / RECOVERY_POINT_CHECKPOINT) == {("gone-too", 0): 0}
    (tmp_path / "stale-0.x-delete").mkdir()
    manager.close()
    again = logs.manager(tmp_path, CONFIG)
    again.load(now_ms=0)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["gone-too-0"]


def test_open_new_builds_a_log_that_only_register_adds(tmp_path: Path, logs: OpenedLogs) -> None:
    """``open_new`` makes the directory and segment but leaves the manager's logs alone (it may run in another
    thread); ``register`` adds the log, once."""
    manager = logs.manager(tmp_path, LogConfig())
    manager.load(now_ms=0)
    built = manager.open_new("fresh", 3)
    assert (tmp_path / "fresh-3").is_dir() and manager.get("fresh", 3) is None and manager.all_logs() == {}
    assert manager.register(built) is built and manager.get("fresh", 3) is built
    duplicate = manager.open_new("fresh", 3)
    with pytest.raises(ValueError, match="already has a log"):
        manager.register(duplicate)
    duplicate.close()
    assert manager.create("fresh", 3) is built
