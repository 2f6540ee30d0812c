"""PartitionLog.truncate_fully_and_start_at: a follower whose log ends below its leader's log start empties its log
and goes on from there, across a restart too."""

from __future__ import annotations

from pathlib import Path

import pytest
from oncelog.storage import local_log
from oncelog.storage.config import LogConfig
from support.opened_logs import OpenedLogs

from storage.batches import make_batch, producer_data

CONFIG = LogConfig(segment_bytes=1000, index_interval_bytes=200)


def test_the_log_starts_over_at_the_offset(tmp_path: Path, logs: OpenedLogs) -> None:
    directory = tmp_path / "t-0"
    log = logs.open(directory, CONFIG)
    for i in range(6):
        log.append(make_batch(2, value_size=40), now_ms=i, leader_epoch=3)
    log.append(producer_data(7, 0, txn=False), now_ms=10, leader_epoch=3)
    log.flush()
    log.producer_state.take_snapshot(log.log_end_offset)
    assert log.leader_epoch_cache.latest_epoch == 3

    log.truncate_fully_and_start_at(40)
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark, log.recovery_point) == (40, 40, 40, 40)
    assert log.leader_epoch_cache.entries == []
    assert log.producer_state.producers == {}
    assert log.producer_state.snapshot_offsets() == []
    assert [s.base_offset for s in log.segments] == [40]
    log.append_as_follower(make_batch(2, base_offset=40), now_ms=20)
    assert log.log_end_offset == 42
    log.close()

    reopened = logs.open(directory, CONFIG)
    assert (reopened.log_start_offset, reopened.log_end_offset) == (40, 42)
    assert reopened.producer_state.producers == {}
    reopened.close()


def test_a_failed_directory_sync_leaves_the_high_watermark_within_the_cut_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logs: OpenedLogs
) -> None:
    """The segments are cut before the directory is synced: if that sync fails, the high watermark has followed the
    cut anyway (it is never above the log end)."""
    log = logs.open(tmp_path / "t-0", CONFIG)
    for i in range(6):
        log.append(make_batch(2, value_size=40), now_ms=i)
    log.update_high_watermark(12)
    assert log.high_watermark == log.log_end_offset == 12

    def failing_sync(_directory: Path) -> None:
        raise OSError("directory sync failed")

    monkeypatch.setattr(local_log, "fsync_dir", failing_sync)
    with pytest.raises(OSError):
        log.truncate_to(5)
    assert log.log_end_offset == 4 and log.high_watermark == 4
    with pytest.raises(OSError):
        log.truncate_fully_and_start_at(30)
    assert log.log_start_offset == log.log_end_offset == log.high_watermark == 30
    monkeypatch.undo()
    log.close()
