"""Raising the log start offset (DeleteRecords): mid-segment, durable through the checkpoint before the log changes,
kept across restarts and crashes, segments below it deleted, producer and transaction state as Kafka keeps them."""

from __future__ import annotations

from pathlib import Path

import pytest
from oncelog.protocol.records.batch import iter_headers
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import KafkaStorageError, OffsetOutOfRangeError
from oncelog.storage.log import AppendOrigin, PartitionLog
from oncelog.storage.log_manager import LOG_START_OFFSET_CHECKPOINT, LogManager
from support.killed_log import crash
from support.opened_logs import OpenedLogs

from storage.batches import TRANSACTIONAL, control_batch, make_batch

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=200, retention_ms=-1)
COMPACTED = LogConfig(segment_bytes=1500, index_interval_bytes=200, retention_ms=-1, cleanup_policy=("compact",))


def _manager(logs: OpenedLogs, data_dir: Path, config: LogConfig = CONFIG) -> LogManager:
    manager = logs.manager(data_dir, config)
    manager.load(now_ms=0)
    return manager


def _filled(manager: LogManager, batches: int = 60) -> PartitionLog:
    """A log of ``batches`` 3-record batches over several segments, all below the high watermark."""
    log = manager.create("t", 0)
    for i in range(batches):
        log.append(make_batch(3, timestamp=1000 + i), now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    return log


def _first_offsets(data: bytes) -> list[int]:
    return [header.base_offset for _, header in iter_headers(data)]


def test_mid_segment_start_hides_what_is_below_and_deletes_whole_segments(tmp_path: Path, logs: OpenedLogs) -> None:
    manager = _manager(logs, tmp_path)
    log = _filled(manager)
    bases = [s.base_offset for s in log.segments]
    assert len(bases) >= 4
    target = bases[2] + 4  # mid-segment, mid-batch (batches hold 3 offsets)
    manager.advance_log_start_offsets({("t", 0): target})
    assert log.log_start_offset == target
    with pytest.raises(OffsetOutOfRangeError):
        log.read(target - 1, 1 << 20)
    assert _first_offsets(log.read(target, 1))[0] == target - 1  # the batch holding it, whole
    assert log.offset_for_timestamp(0) == (target, log.offset_for_timestamp(0)[1])  # raised to the start
    assert [s.base_offset for s in log.segments] == bases  # nothing deleted yet

    assert log.delete_segments_below_start() == 2
    assert [s.base_offset for s in log.segments] == bases[2:]
    assert not (tmp_path / "t-0" / f"{bases[1]:020d}.log").exists()
    assert log.log_start_offset == target  # not lowered to the first segment's base
    assert log.delete_segments_below_start() == 0


def test_the_start_never_passes_the_high_watermark_nor_goes_back(tmp_path: Path, logs: OpenedLogs) -> None:
    manager = _manager(logs, tmp_path)
    log = _filled(manager, 10)
    log.update_high_watermark(12)
    for refused in (13, -2):
        with pytest.raises(OffsetOutOfRangeError):
            manager.advance_log_start_offsets({("t", 0): refused})
    assert log.log_start_offset == 0
    manager.advance_log_start_offsets({("t", 0): 12})
    assert log.log_start_offset == 12 and log.high_watermark == 12 and log.last_stable_offset == 12
    manager.advance_log_start_offsets({("t", 0): 5})  # below the start: nothing happens
    assert log.log_start_offset == 12


def test_one_refused_target_changes_no_log(tmp_path: Path, logs: OpenedLogs) -> None:
    manager = _manager(logs, tmp_path)
    first = _filled(manager)
    second = manager.create("u", 0)
    second.append(make_batch(2), now_ms=0)
    with pytest.raises(OffsetOutOfRangeError):
        manager.advance_log_start_offsets({("t", 0): 10, ("u", 0): 3})  # u's high watermark is 2
    assert (first.log_start_offset, second.log_start_offset) == (0, 0)
    assert not (tmp_path / LOG_START_OFFSET_CHECKPOINT).exists()


def test_the_start_is_in_the_checkpoint_before_the_log_and_survives_a_crash(tmp_path: Path, logs: OpenedLogs) -> None:
    manager = _manager(logs, tmp_path)
    log = _filled(manager)
    bases = [s.base_offset for s in log.segments]
    target = bases[1] + 7
    manager.advance_log_start_offsets({("t", 0): target})
    assert (tmp_path / LOG_START_OFFSET_CHECKPOINT).read_text() == f"0\n1\nt 0 {target}\n"
    crash(log)  # killed before the segments below were deleted

    again = _manager(logs, tmp_path)
    reopened = again.get("t", 0)
    assert reopened.log_start_offset == target
    assert reopened.log_end_offset == log.log_end_offset
    with pytest.raises(OffsetOutOfRangeError):
        reopened.read(target - 1, 100)
    # The retention sweep deletes what the crash left below the start, even without retention limits.
    assert reopened.enforce_retention(now_ms=0) == 1
    assert reopened.segments[0].base_offset == bases[1]
    again.close()

    third = _manager(logs, tmp_path)
    assert third.get("t", 0).log_start_offset == target


def test_the_sweep_deletes_segments_below_the_start_of_a_compacted_log_too(tmp_path: Path, logs: OpenedLogs) -> None:
    log = _filled(_manager(logs, tmp_path))
    target = log.segments[2].base_offset
    log.advance_log_start_offset(target)
    log.update_config(COMPACTED)
    assert log.enforce_retention(now_ms=10**12) == 2
    assert log.segments[0].base_offset == target


def test_a_full_disk_leaves_the_start_and_the_checkpoint_as_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logs: OpenedLogs
) -> None:
    manager = _manager(logs, tmp_path)
    log = _filled(manager)
    manager.checkpoint()
    saved = (tmp_path / LOG_START_OFFSET_CHECKPOINT).read_bytes()

    def disk_full(path: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("oncelog.storage.checkpoint.atomic_write", disk_full)
    with pytest.raises(KafkaStorageError):
        manager.advance_log_start_offsets({("t", 0): 30})
    assert log.log_start_offset == 0
    assert (tmp_path / LOG_START_OFFSET_CHECKPOINT).read_bytes() == saved
    monkeypatch.undo()
    manager.advance_log_start_offsets({("t", 0): 30})
    assert log.log_start_offset == 30


def test_producers_whose_batches_are_deleted_go_on(tmp_path: Path, logs: OpenedLogs) -> None:
    manager = _manager(logs, tmp_path)
    log = manager.create("t", 0)
    for seq in range(0, 60, 3):
        log.append(make_batch(3, producer_id=7, producer_epoch=2, base_sequence=seq), now_ms=0)
    log.append(make_batch(3), now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    manager.advance_log_start_offsets({("t", 0): log.log_end_offset})
    assert log.delete_segments_below_start() >= 1
    # Kafka keeps the producer's state (KIP-360): its next sequence is checked, a retry is still a duplicate.
    entry = log.producer_state.last_entry(7)
    assert entry is not None and (entry.epoch, entry.last_seq) == (2, 59)
    retried = log.append(make_batch(3, producer_id=7, producer_epoch=2, base_sequence=57), now_ms=0)
    assert retried.duplicate and retried.first_offset == 57
    nxt = log.append(make_batch(3, producer_id=7, producer_epoch=2, base_sequence=60), now_ms=0)
    assert not nxt.duplicate and nxt.first_offset == 63
    manager.close()
    assert _manager(logs, tmp_path).get("t", 0).producer_state.last_entry(7).last_seq == 62


def test_an_open_transaction_below_the_start_holds_the_lso_at_the_start(tmp_path: Path, logs: OpenedLogs) -> None:
    manager = _manager(logs, tmp_path)
    log = manager.create("t", 0)
    log.append(make_batch(2, producer_id=5, producer_epoch=0, base_sequence=0, attributes=TRANSACTIONAL), now_ms=0)
    log.append(make_batch(4), now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 0
    manager.advance_log_start_offsets({("t", 0): 3})
    assert log.last_stable_offset == 3  # the open transaction's first offset 0, raised to the start
    log.append(control_batch(5, 0, commit=False), now_ms=0, origin=AppendOrigin.COORDINATOR)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == log.log_end_offset == 7
    # The abort stays in the index of the segment holding the start, so read_committed readers can drop it.
    assert log.collect_aborted_transactions(3, 7) == [(5, 0)]
