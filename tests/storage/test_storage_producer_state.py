"""Idempotent producer state: duplicates, sequence/epoch rules, transactions, snapshots, expiration."""

from __future__ import annotations

from pathlib import Path

import pytest
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import InvalidProducerEpochError, InvalidTxnStateError, OutOfOrderSequenceError
from oncelog.storage.log import AppendOrigin, PartitionLog
from oncelog.storage.producer_state import ProducerStateEntry, decode_snapshot, encode_snapshot
from support.opened_logs import OpenedLogs

from storage.batches import TRANSACTIONAL, control_batch, make_batch

CONFIG = LogConfig(segment_bytes=1500, index_interval_bytes=200, producer_id_expiration_ms=10_000)
PID = 42


def idem(seq: int, count: int = 2, *, epoch: int = 0, pid: int = PID, ts: int = 1000, txn: bool = False) -> bytes:
    return make_batch(
        count,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        timestamp=ts,
        attributes=TRANSACTIONAL if txn else 0,
    )


@pytest.fixture
def log(tmp_path: Path, logs: OpenedLogs) -> PartitionLog:
    return logs.open(tmp_path / "t-0", CONFIG)


def test_duplicate_returns_original_offsets_and_appends_nothing(log: PartitionLog) -> None:
    first = log.append(idem(0, 3), now_ms=0)
    log.append(idem(3, 2), now_ms=0)
    size, end = log.active_segment.size, log.log_end_offset
    retry = log.append(idem(0, 3), now_ms=0)
    assert (retry.duplicate, retry.first_offset, retry.last_offset) == (
        True,
        first.first_offset,
        first.last_offset,
    )
    assert retry.max_timestamp == 1000
    retry2 = log.append(idem(3, 2), now_ms=0)
    assert (retry2.duplicate, retry2.first_offset, retry2.last_offset) == (True, 3, 4)
    assert (log.active_segment.size, log.log_end_offset) == (size, end)


def test_only_last_five_batches_are_cached(log: PartitionLog) -> None:
    for i in range(6):
        log.append(idem(2 * i), now_ms=0)
    assert log.append(idem(2), now_ms=0).duplicate  # 2nd batch: still among the last 5
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idem(0), now_ms=0)  # 1st batch fell out of the cache


def test_duplicate_inside_multi_batch_append_answers_the_whole_request(log: PartitionLog) -> None:
    log.append(idem(0), now_ms=0)
    end = log.log_end_offset
    result = log.append(idem(2) + idem(0), now_ms=0)  # Kafka: the first duplicate found answers
    assert result.duplicate and (result.first_offset, result.last_offset) == (0, 1)
    assert log.log_end_offset == end


def test_out_of_order_sequence(log: PartitionLog) -> None:
    log.append(idem(0, 3), now_ms=0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idem(5), now_ms=0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idem(1), now_ms=0)  # overlaps but is not a cached batch
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idem(3) + idem(9), now_ms=0)  # second batch has a gap: nothing appended
    assert log.log_end_offset == 3
    log.append(idem(3) + idem(5), now_ms=0)  # consecutive batches in one request validate in order
    assert log.log_end_offset == 7


def test_epochs(log: PartitionLog) -> None:
    log.append(idem(0, epoch=3), now_ms=0)
    with pytest.raises(InvalidProducerEpochError):
        log.append(idem(2, epoch=2), now_ms=0)
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idem(2, epoch=4), now_ms=0)  # a new epoch must start at sequence 0
    log.append(idem(0, epoch=4), now_ms=0)
    entry = log.producer_state.last_entry(PID)
    assert entry is not None and entry.epoch == 4 and len(entry.batches) == 1
    with pytest.raises(InvalidProducerEpochError):
        log.append(idem(0, epoch=3), now_ms=0)  # the old epoch's batch is no longer a duplicate either


def test_unknown_producer_may_start_at_any_sequence(log: PartitionLog) -> None:
    # KIP-360 / Kafka 3.9: no state for the producer id -> any sequence is accepted.
    assert log.append(idem(1234, pid=7), now_ms=0).first_offset == 0
    with pytest.raises(OutOfOrderSequenceError):
        log.append(idem(1240, pid=7), now_ms=0)
    log.append(idem(1236, pid=7), now_ms=0)


def test_sequence_wraps_at_int32_max(log: PartitionLog, logs: OpenedLogs) -> None:
    top = 2**31 - 1
    log.append(idem(top - 2, 3), now_ms=0)  # sequences top-2 .. top
    log.append(idem(0, 2), now_ms=0)
    wrapping = idem(2, 3)
    log.append(wrapping, now_ms=0)
    log.append(idem(5, 1), now_ms=0)
    # a batch that itself wraps: base top-1, 4 records -> sequences top-1, top, 0, 1
    log2 = logs.open(log.directory.with_name("w-0"), CONFIG)
    log2.append(idem(top - 1, 4, pid=9), now_ms=0)
    assert log2.producer_state.last_entry(9).last_seq == 1
    assert log2.append(idem(top - 1, 4, pid=9), now_ms=0).duplicate
    log2.append(idem(2, 1, pid=9), now_ms=0)
    with pytest.raises(OutOfOrderSequenceError):
        log2.append(idem(top, 1, pid=9), now_ms=0)


def test_non_idempotent_batches_skip_producer_state(log: PartitionLog) -> None:
    log.append(make_batch(2), now_ms=0)
    assert log.append(make_batch(2), now_ms=0).first_offset == 2
    assert log.producer_state.producers == {}


def test_transactions_track_first_unstable_offset(log: PartitionLog) -> None:
    log.append(make_batch(3), now_ms=0)
    assert log.producer_state.first_unstable_offset() is None
    log.append(idem(0, txn=True), now_ms=0)
    log.append(idem(0, pid=8, txn=True), now_ms=0)
    log.append(idem(2, txn=True), now_ms=0)
    assert log.producer_state.first_unstable_offset() == 3
    with pytest.raises(InvalidTxnStateError):
        log.append(idem(4), now_ms=0)
    log.append(control_batch(PID, 0), now_ms=0, origin=AppendOrigin.COORDINATOR)
    assert log.producer_state.first_unstable_offset() == 3  # completed, but the marker is above the HW
    log.update_high_watermark(log.log_end_offset)
    assert log.producer_state.first_unstable_offset() == 5
    log.append(control_batch(8, 0, commit=False), now_ms=0, origin=AppendOrigin.COORDINATOR)
    log.update_high_watermark(log.log_end_offset)
    assert log.producer_state.first_unstable_offset() is None
    log.append(idem(0, pid=10, epoch=2, txn=True), now_ms=0)
    with pytest.raises(InvalidProducerEpochError):
        log.append(control_batch(10, 1), now_ms=0, origin=AppendOrigin.COORDINATOR)  # a marker from an older epoch
    assert log.producer_state.first_unstable_offset() is not None
    # markers may carry a newer epoch (coordinator bump)
    log.append(control_batch(10, 3), now_ms=0, origin=AppendOrigin.COORDINATOR)
    log.update_high_watermark(log.log_end_offset)
    assert log.producer_state.last_entry(10).epoch == 3
    assert log.producer_state.first_unstable_offset() is None


def test_snapshot_round_trip_format() -> None:
    from oncelog.storage.producer_state import ProducerStateManager

    manager = ProducerStateManager(Path("."), 1000)
    data = encode_snapshot(manager.producers.values())
    assert decode_snapshot(data) == []


def test_snapshots_at_roll_and_close_and_reload(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "t-0", CONFIG)
    seq = {1: 0, 2: 0, 3: 0}
    for i in range(60):
        pid = 1 + i % 3
        log.append(idem(seq[pid], 2, pid=pid, ts=1000 + i, txn=(pid == 3)), now_ms=0)
        seq[pid] += 2
    assert len(log.segments) > 2
    snaps = sorted(int(p.stem) for p in (tmp_path / "t-0").glob("*.snapshot"))
    assert snaps == [s.base_offset for s in log.segments[1:]]
    state = {pid: e for pid, e in log.producer_state.producers.items()}
    unstable = log.producer_state.first_unstable_offset()
    assert unstable is not None
    end = log.log_end_offset
    log.close()
    assert (tmp_path / "t-0" / f"{end:020d}.snapshot").exists()
    reopened = logs.open(tmp_path / "t-0", CONFIG, recovery_point=end, clean_shutdown=True)
    assert reopened.producer_state.producers == state
    assert reopened.producer_state.first_unstable_offset() == unstable
    retry = reopened.append(idem(seq[1] - 2, 2, pid=1, ts=0), now_ms=0)
    assert retry.duplicate and retry.last_offset == state[1].batches[-1].last_offset


def test_corrupt_or_missing_snapshot_rebuilt_from_log(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "t-0", CONFIG)
    for i in range(40):
        log.append(idem(2 * (i // 2), 2, pid=1 + i % 2, ts=1000 + i), now_ms=0)
    state = dict(log.producer_state.producers)
    end = log.log_end_offset
    log.close()
    directory = tmp_path / "t-0"
    latest = directory / f"{end:020d}.snapshot"
    raw = bytearray(latest.read_bytes())
    raw[-3] ^= 0xFF
    latest.write_bytes(bytes(raw))
    reopened = logs.open(directory, CONFIG, recovery_point=end, clean_shutdown=True)
    assert not latest.exists()  # the bad snapshot was deleted
    assert reopened.producer_state.producers == state
    reopened.close()
    for snap in directory.glob("*.snapshot"):
        snap.unlink()
    again = logs.open(directory, CONFIG, recovery_point=end, clean_shutdown=True)
    assert again.producer_state.producers == state


def test_unclean_open_ignores_snapshots_past_recovery_point(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "t-0", CONFIG)
    for i in range(30):
        log.append(idem(2 * i), now_ms=0)
    state = dict(log.producer_state.producers)
    for seg in log.segments:
        seg.close()
    # A snapshot claiming a different state beyond the recovery point must not be used.
    bogus = log.producer_state.snapshot_path(log.segments[-1].base_offset)
    assert bogus.exists()
    bogus.write_bytes(encode_snapshot([ProducerStateEntry(producer_id=999, epoch=1)]))  # valid, but wrong
    reopened = logs.open(tmp_path / "t-0", CONFIG, recovery_point=0)
    assert reopened.producer_state.producers == state
    for seg in reopened.segments:
        seg.close()
    # With a recovery point past it, the snapshot is trusted (that is what snapshots are for).
    trusting = logs.open(tmp_path / "t-0", CONFIG, recovery_point=reopened.log_end_offset)
    assert 999 in trusting.producer_state.producers


def test_expiration(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "t-0", CONFIG)
    log.append(idem(0, ts=1000), now_ms=1000)
    log.append(idem(0, pid=5, ts=5000, txn=True), now_ms=5000)
    log.append(idem(0, pid=6, ts=6000), now_ms=6000)
    assert log.expire_producers(10_999) == 0
    assert log.expire_producers(11_000) == 1  # idle for producer.id.expiration.ms
    assert set(log.producer_state.producers) == {5, 6}
    assert log.expire_producers(10**9) == 1  # the producer with an open transaction stays
    assert set(log.producer_state.producers) == {5}
    log.append(idem(77), now_ms=0)  # expired producer: any sequence accepted again
    end = log.log_end_offset
    log.close()
    reopened = logs.open(tmp_path / "t-0", CONFIG, recovery_point=end, clean_shutdown=True, now_ms=10**9)
    assert set(reopened.producer_state.producers) == {5}  # expired entries are skipped on load
