"""Transactions in the storage layer: markers, fencing, aborted-transaction index, LSO, recovery, snapshots."""

from __future__ import annotations

import os
import random
import shutil
import struct
from pathlib import Path

import crc32c
import pytest
from oncelog.protocol.records.codec import Record, encode_batch
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import (
    InvalidProducerEpochError,
    InvalidRecordError,
    InvalidTxnStateError,
    KafkaStorageError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from oncelog.storage.log import AppendOrigin, PartitionLog
from oncelog.storage.producer_state import ProducerInfo, decode_snapshot
from oncelog.storage.txn_index import ENTRY_SIZE
from support.killed_log import crash
from support.opened_logs import OpenedLogs

from storage.batches import make_batch
from storage.batches import producer_data as data
from storage.batches import txn_marker as marker

CONFIG = LogConfig(segment_bytes=700, index_interval_bytes=120)
COORD = AppendOrigin.COORDINATOR


class Producers:
    """Drives several transactional producers against one log, keeping sequences and a model of aborts."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.seq: dict[int, int] = {}
        self.first: dict[int, int] = {}
        self.aborted: list[tuple[int, int, int]] = []  # (pid, first offset, marker offset)

    def send(self, pid: int, count: int = 2) -> int:
        result = self.log.append(data(pid, self.seq.get(pid, 0), count), now_ms=0)
        self.seq[pid] = self.seq.get(pid, 0) + count
        self.first.setdefault(pid, result.first_offset)
        return result.first_offset

    def end(self, pid: int, *, commit: bool) -> int:
        offset = self.log.append(marker(pid, commit=commit), now_ms=0, origin=COORD).first_offset
        first = self.first.pop(pid, None)
        if not commit and first is not None:
            self.aborted.append((pid, first, offset))
        return offset

    def plain(self) -> None:
        self.log.append(make_batch(3, value_size=20), now_ms=0)


def busy_log(logs: OpenedLogs, directory: Path, *, seed: int = 1, rounds: int = 120) -> Producers:
    """Interleaved transactions of 4 producers plus plain batches, spanning several segments."""
    rng = random.Random(seed)
    p = Producers(logs.open(directory, CONFIG))
    for _ in range(rounds):
        pid = rng.randrange(1, 5)
        action = rng.random()
        if action < 0.5:
            p.send(pid, rng.randrange(1, 4))
        elif action < 0.8:
            p.end(pid, commit=rng.random() < 0.4)
        else:
            p.plain()
    return p


def txn_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.glob("*.txnindex"))}


def expected_aborted(model: list[tuple[int, int, int]], start: int, upper: int) -> list[tuple[int, int]]:
    return [(pid, first) for pid, first, last in model if last >= start and first < upper]


@pytest.fixture
def log(tmp_path: Path, logs: OpenedLogs) -> PartitionLog:
    return logs.open(tmp_path / "t-0", CONFIG)


# ------------------------------------------------------------------------------------------ append origin
def test_control_batches_rejected_from_clients(log: PartitionLog) -> None:
    log.append(data(7, 0), now_ms=0)
    with pytest.raises(InvalidRecordError, match="not allowed to write control records"):
        log.append(marker(7, commit=True), now_ms=0)
    with pytest.raises(InvalidRecordError):
        log.append(data(8, 0) + marker(7, commit=True), now_ms=0, origin=AppendOrigin.CLIENT)
    assert log.log_end_offset == 2
    assert log.producer_state.last_entry(8) is None
    assert log.append(marker(7, commit=True), now_ms=0, origin=COORD).first_offset == 2


def test_coordinator_appends_plain_batches_and_skips_sequence_checks(log: PartitionLog) -> None:
    log.append(make_batch(2), now_ms=0, origin=COORD)  # e.g. a __transaction_state record
    # transactional offset commits from the group coordinator carry no sequence
    log.append(data(5, -1, epoch=1), now_ms=0, origin=COORD)
    log.append(data(5, -1, epoch=1), now_ms=0, origin=COORD)  # not answered as a duplicate
    assert log.log_end_offset == 6
    with pytest.raises(InvalidProducerEpochError):
        log.append(data(5, -1, epoch=0), now_ms=0, origin=COORD)
    with pytest.raises(InvalidTxnStateError):
        log.append(data(5, -1, epoch=1, txn=False), now_ms=0, origin=COORD)


def _recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_malformed_markers_rejected(log: PartitionLog) -> None:
    compressed = bytearray(marker(1, commit=True))
    struct.pack_into(">h", compressed, 21, struct.unpack_from(">h", compressed, 21)[0] | 1)
    with pytest.raises(InvalidRecordError, match="compressed"):
        log.append(_recrc(compressed), now_ms=0, origin=COORD)
    leader_change = encode_batch(
        [Record(0, 1000, struct.pack(">hh", 0, 2), b"\x00\x00", [])],
        producer_id=1,
        producer_epoch=0,
        base_sequence=-1,
        transactional=True,
        control=True,
    )
    with pytest.raises(InvalidRecordError, match="not a transaction marker"):
        log.append(leader_change, now_ms=0, origin=COORD)
    short_value = encode_batch(
        [Record(0, 1000, struct.pack(">hh", 0, 1), b"\x00", [])],
        producer_id=1,
        producer_epoch=0,
        base_sequence=-1,
        transactional=True,
        control=True,
    )
    with pytest.raises(InvalidRecordError):
        log.append(short_value, now_ms=0, origin=COORD)
    assert log.log_end_offset == 0
    # a control batch without a producer id (e.g. KRaft's LEADER_CHANGE) touches no producer state
    no_pid = encode_batch([Record(0, 1000, struct.pack(">hh", 0, 2), b"\x00\x00", [])], control=True)
    log.append(no_pid, now_ms=0, origin=COORD)
    assert log.producer_state.producers == {}


# ------------------------------------------------------------------------------------------ fencing
def test_marker_with_older_epoch_is_fenced(log: PartitionLog) -> None:
    log.append(data(1, 0, epoch=2), now_ms=0)
    with pytest.raises(InvalidProducerEpochError):
        log.append(marker(1, 1, commit=False), now_ms=0, origin=COORD)
    assert log.log_end_offset == 2
    assert log.producer_state.first_unstable_offset() == 0
    log.append(marker(1, 2, commit=False), now_ms=0, origin=COORD)
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3


def test_marker_with_older_coordinator_epoch_is_fenced(log: PartitionLog) -> None:
    log.append(data(1, 0), now_ms=0)
    log.append(marker(1, commit=True, coordinator_epoch=5), now_ms=0, origin=COORD)
    assert log.producer_state.last_entry(1).coordinator_epoch == 5
    log.append(data(1, 2), now_ms=0)
    end = log.log_end_offset
    with pytest.raises(TransactionCoordinatorFencedError):
        log.append(marker(1, commit=False, coordinator_epoch=4), now_ms=0, origin=COORD)
    assert log.log_end_offset == end
    assert log.producer_state.last_entry(1).current_txn_first_offset == 3
    log.append(marker(1, commit=False, coordinator_epoch=6), now_ms=0, origin=COORD)
    assert log.producer_state.last_entry(1).coordinator_epoch == 6
    assert log.producer_state.last_entry(1).current_txn_first_offset is None


def test_zombie_write_after_marker_bump_is_rejected(log: PartitionLog) -> None:
    log.append(data(1, 0, epoch=2), now_ms=0)
    log.append(data(1, 2, epoch=2), now_ms=0)
    # the coordinator aborts a timed-out transaction with a bumped epoch
    log.append(marker(1, 3, commit=False), now_ms=0, origin=COORD)
    entry = log.producer_state.last_entry(1)
    assert entry.epoch == 3 and entry.last_seq == -1 and entry.current_txn_first_offset is None
    with pytest.raises(InvalidProducerEpochError):
        log.append(data(1, 4, epoch=2), now_ms=0)  # the zombie goes on
    with pytest.raises(OutOfOrderSequenceError):
        log.append(data(1, 4, epoch=3), now_ms=0)  # sequences restart with the epoch
    assert log.append(data(1, 0, epoch=3), now_ms=0).first_offset == 5
    assert log.producer_state.last_entry(1).current_txn_first_offset == 5


def test_marker_without_open_transaction_only_appends(log: PartitionLog) -> None:
    log.append(data(1, 0), now_ms=0)
    log.append(marker(1, commit=False), now_ms=0, origin=COORD)
    log.update_high_watermark(log.log_end_offset)
    files_before = txn_files(log.directory)
    state_before = log.producer_state.active_producers()
    retry = log.append(marker(1, commit=False), now_ms=0, origin=COORD)  # a retried WriteTxnMarkers
    assert (retry.first_offset, retry.duplicate) == (3, False)
    log.update_high_watermark(log.log_end_offset)
    assert txn_files(log.directory) == files_before
    assert log.producer_state.active_producers() == state_before
    assert log.last_stable_offset == 4
    assert log.collect_aborted_transactions(0, 4) == [(1, 0)]
    # a marker for a producer the partition never saw
    log.append(marker(99, 4, commit=True, coordinator_epoch=2), now_ms=0, origin=COORD)
    assert log.producer_state.last_entry(99).coordinator_epoch == 2


def test_transactional_batch_after_marker_starts_new_transaction(log: PartitionLog) -> None:
    log.append(data(1, 0), now_ms=0)
    log.append(marker(1, commit=True), now_ms=0, origin=COORD)
    log.append(data(1, 2), now_ms=0)
    log.update_high_watermark(log.log_end_offset)
    assert log.producer_state.last_entry(1).current_txn_first_offset == 3
    assert log.last_stable_offset == 3
    log.append(marker(1, commit=False), now_ms=0, origin=COORD)
    log.update_high_watermark(log.log_end_offset)
    assert log.collect_aborted_transactions(0, 10) == [(1, 3)]


# ------------------------------------------------------------------------------------------ txn index
def test_abort_writes_index_entry_and_commit_does_not(log: PartitionLog) -> None:
    log.append(data(1, 0), now_ms=0)  # 0-1
    log.append(data(2, 0), now_ms=0)  # 2-3
    log.append(marker(1, commit=True), now_ms=0, origin=COORD)  # 4
    path = log.active_segment.txn_index.path
    assert path.exists() and path.read_bytes() == b""
    log.append(data(1, 2), now_ms=0)  # 5-6
    log.append(marker(2, commit=False), now_ms=0, origin=COORD)  # 7: producer 1's txn at 5 still open
    log.append(marker(1, commit=False), now_ms=0, origin=COORD)  # 8: none open -> LSO after it is 9
    raw = path.read_bytes()
    assert len(raw) == 2 * ENTRY_SIZE == 68
    assert list(struct.iter_unpack(">hqqqq", raw)) == [(0, 2, 2, 7, 5), (0, 1, 5, 8, 9)]


def test_collect_aborted_transactions_matches_model(tmp_path: Path, logs: OpenedLogs) -> None:
    p = busy_log(logs, tmp_path / "t-0", seed=11, rounds=150)
    log = p.log
    assert len(log.segments) >= 4
    assert len(p.aborted) >= 5
    assert sum(1 for s in log.segments if s.txn_index.entries) >= 2
    # overlapping transactions of different producers were aborted
    assert any(a[1] < b[1] < a[2] for a in p.aborted for b in p.aborted if a is not b)
    end = log.log_end_offset
    for start in range(end + 1):
        for upper in range(start, end + 2, 3):
            assert log.collect_aborted_transactions(start, upper) == expected_aborted(p.aborted, start, upper)


def test_collect_across_segment_boundary(log: PartitionLog) -> None:
    log.append(data(1, 0), now_ms=0)  # 0-1, txn of producer 1 starts in segment 0
    log.roll()
    log.append(data(2, 0), now_ms=0)  # 2-3
    log.roll()
    log.append(marker(1, commit=False), now_ms=0, origin=COORD)  # 4 in segment 2
    log.append(marker(2, commit=False), now_ms=0, origin=COORD)  # 5
    assert [len(s.txn_index.entries) for s in log.segments] == [0, 0, 2]
    assert log.collect_aborted_transactions(0, 2) == [(1, 0)]
    assert log.collect_aborted_transactions(1, 6) == [(1, 0), (2, 2)]
    assert log.collect_aborted_transactions(2, 3) == [(1, 0), (2, 2)]
    assert log.collect_aborted_transactions(5, 6) == [(2, 2)]
    assert log.collect_aborted_transactions(6, 6) == []


# ------------------------------------------------------------------------------------------ LSO
def test_last_stable_offset_arithmetic(log: PartitionLog) -> None:
    log.append(make_batch(3), now_ms=0)  # 0-2
    assert (log.high_watermark, log.last_stable_offset) == (0, 0)
    log.update_high_watermark(3)
    assert log.last_stable_offset == 3
    log.append(data(1, 0), now_ms=0)  # 3-4 opens a transaction
    log.append(data(2, 0), now_ms=0)  # 5-6 another one
    log.update_high_watermark(log.log_end_offset)
    assert log.last_stable_offset == 3  # the ongoing transaction holds it
    log.append(marker(1, commit=True), now_ms=0, origin=COORD)  # 7
    assert log.last_stable_offset == 3  # completed, but the marker is not below the high watermark yet
    log.update_high_watermark(7)
    assert log.last_stable_offset == 3
    log.update_high_watermark(8)
    assert log.last_stable_offset == 5  # producer 2 still open
    log.append(marker(2, commit=False), now_ms=0, origin=COORD)  # 8
    log.append(make_batch(1), now_ms=0)  # 9
    assert log.last_stable_offset == 5
    log.update_high_watermark(9)
    assert log.last_stable_offset == 9
    assert log.producer_state.first_unstable_offset() is None
    log.update_high_watermark(10)
    assert log.last_stable_offset == 10


def test_lso_never_exceeds_high_watermark_nor_falls_below_log_start(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "t-0", CONFIG, log_start_offset=10)
    log.append(data(1, 0), now_ms=0)  # 10-11
    assert log.last_stable_offset == 10
    log.update_high_watermark(12)
    assert log.last_stable_offset == 10
    log.append(marker(1, commit=True), now_ms=0, origin=COORD)
    log.update_high_watermark(13)
    assert log.last_stable_offset == 13


# ------------------------------------------------------------------------------------------ recovery
@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[int, int, int]]]:
    root = tmp_path_factory.mktemp("txn")
    p = busy_log(OpenedLogs(), root / "t-0", seed=5, rounds=160)
    assert len(p.log.segments) >= 4 and len(p.aborted) >= 4
    p.log.flush()
    crash(p.log)
    return root / "t-0", p.aborted


def _copy(src: Path, tmp_path: Path) -> Path:
    target = tmp_path / "t-0"
    shutil.copytree(src, target)
    return target


@pytest.mark.parametrize("recovery_point", ["zero", "middle"])
def test_recovery_after_torn_tail_rebuilds_txnindex_identical(
    crashed: tuple[Path, list], tmp_path: Path, recovery_point: str, logs: OpenedLogs
) -> None:
    src, aborted = crashed
    directory = _copy(src, tmp_path)
    expected = txn_files(directory)
    assert any(expected.values())
    for path in directory.glob("*.txnindex"):  # damage them all: recovery must rewrite what it scans
        path.write_bytes(b"\x01" * 7)
    last = sorted(directory.glob("*.log"))[-1]
    with open(last, "ab") as f:
        f.write(random.Random(2).randbytes(40))  # a torn batch
    bases = sorted(int(p.stem) for p in directory.glob("*.log"))
    point = 0 if recovery_point == "zero" else bases[2] + 1
    log = logs.open(directory, CONFIG, recovery_point=point)
    assert log.recovered_segments == (len(bases) if point == 0 else len(bases) - 2)
    if point:
        # the trusted segments' damaged files were noticed as corrupt and rebuilt as well
        assert log.rebuilt_txn_indexes == len(bases)
    assert txn_files(directory) == expected
    end = log.log_end_offset
    assert log.collect_aborted_transactions(0, end) == expected_aborted(aborted, 0, end)
    crash(log)


def test_torn_marker_reopens_its_transaction(log: PartitionLog, tmp_path: Path, logs: OpenedLogs) -> None:
    log.append(data(1, 0), now_ms=0)
    log.append(data(2, 0), now_ms=0)
    log.append(marker(2, commit=False), now_ms=0, origin=COORD)  # 4
    log.append(marker(1, commit=False), now_ms=0, origin=COORD)  # 5
    crash(log)
    path = log.active_segment.log_path
    os.truncate(path, path.stat().st_size - 5)
    reopened = logs.open(log.directory, CONFIG)
    assert reopened.log_end_offset == 5
    assert reopened.producer_state.last_entry(1).current_txn_first_offset == 0
    assert reopened.last_stable_offset == 0
    assert reopened.collect_aborted_transactions(0, 5) == [(2, 2)]
    assert len(reopened.active_segment.txn_index.path.read_bytes()) == ENTRY_SIZE


@pytest.mark.parametrize("damage", ["missing", "odd-size", "bad-version", "out-of-range"])
def test_clean_open_rebuilds_damaged_txnindex(
    crashed: tuple[Path, list], tmp_path: Path, damage: str, logs: OpenedLogs
) -> None:
    src, _aborted = crashed
    log = logs.open(_copy(src, tmp_path), CONFIG)  # recover once, then close cleanly
    log.close()
    directory = log.directory
    expected = txn_files(directory)
    name = next(n for n, raw in expected.items() if raw)
    path = directory / name
    if damage == "missing":
        path.unlink()
    elif damage == "odd-size":
        with open(path, "ab") as f:
            f.write(b"\x00\x01")
    elif damage == "bad-version":
        path.write_bytes(b"\x00\x07" + expected[name][2:])
    else:
        path.write_bytes(expected[name][:-ENTRY_SIZE] + struct.pack(">hqqqq", 0, 1, 0, 10**12, 10**12))
    reopened = logs.open(directory, CONFIG, clean_shutdown=True)
    assert reopened.recovered_segments == 0
    assert reopened.rebuilt_txn_indexes == 1
    assert txn_files(directory) == expected
    crash(reopened)


def test_clean_open_trusts_intact_txnindex(crashed: tuple[Path, list], tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(_copy(crashed[0], tmp_path), CONFIG)
    log.close()
    reopened = logs.open(log.directory, CONFIG, clean_shutdown=True)
    assert reopened.rebuilt_txn_indexes == 0
    crash(reopened)


# ------------------------------------------------------------------------------------------ snapshots
def test_snapshot_round_trip_with_ongoing_transaction(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "t-0", CONFIG)
    log.append(data(1, 0), now_ms=0)
    log.append(marker(1, commit=True, coordinator_epoch=3), now_ms=0, origin=COORD)
    log.append(make_batch(2), now_ms=0)  # 3-4
    log.append(data(1, 2, count=3), now_ms=0)  # 5-7: ongoing at close
    log.append(data(2, 0), now_ms=0)  # 8-9: ongoing too
    log.close()
    snapshot = log.producer_state.snapshot_path(log.log_end_offset)
    entries = {e.producer_id: e for e in decode_snapshot(snapshot.read_bytes())}
    assert (entries[1].current_txn_first_offset, entries[1].coordinator_epoch) == (5, 3)
    assert entries[2].current_txn_first_offset == 8
    reopened = logs.open(log.directory, CONFIG, clean_shutdown=True)
    assert reopened.producer_state.ongoing == {5: 1, 8: 2}
    assert reopened.last_stable_offset == 5
    assert reopened.producer_state.last_entry(1).coordinator_epoch == 3
    with pytest.raises(TransactionCoordinatorFencedError):
        reopened.append(marker(1, commit=False, coordinator_epoch=2), now_ms=0, origin=COORD)
    reopened.append(marker(1, commit=False, coordinator_epoch=3), now_ms=0, origin=COORD)  # 10
    reopened.update_high_watermark(reopened.log_end_offset)
    assert reopened.last_stable_offset == 8
    assert [tuple(e) for e in reopened.active_segment.txn_index.entries] == [(1, 5, 10, 8)]
    assert reopened.collect_aborted_transactions(0, 11) == [(1, 5)]


def test_active_producers_listing(log: PartitionLog) -> None:
    log.append(data(4, 0, count=3, epoch=1), now_ms=0)
    log.append(marker(4, 1, commit=True, coordinator_epoch=2), now_ms=0, origin=COORD)
    log.append(data(3, 7, count=2, txn=False), now_ms=0)
    log.append(data(5, 0, epoch=2), now_ms=0)  # 6-7, open
    assert log.producer_state.active_producers() == [
        ProducerInfo(3, 0, 8, 1000, -1, -1),
        ProducerInfo(4, 1, 2, 1000, 2, -1),
        ProducerInfo(5, 2, 1, 1000, -1, 6),
    ]


# ------------------------------------------------------------------------------------------ truncation, retention
def test_truncate_to_through_transactions(log: PartitionLog) -> None:
    log.append(make_batch(2), now_ms=0)  # 0-1
    log.append(data(1, 0), now_ms=0)  # 2-3
    log.roll()
    log.append(data(2, 0), now_ms=0)  # 4-5
    log.append(marker(1, commit=False), now_ms=0, origin=COORD)  # 6
    log.roll()
    log.append(marker(2, commit=False), now_ms=0, origin=COORD)  # 7
    log.update_high_watermark(log.log_end_offset)
    assert log.collect_aborted_transactions(0, 8) == [(1, 2), (2, 4)]
    log.truncate_to(7)  # drops producer 2's marker (and its segment's entry)
    assert log.producer_state.ongoing == {4: 2}
    assert log.last_stable_offset == 4
    assert log.collect_aborted_transactions(0, 7) == [(1, 2)]
    assert txn_files(log.directory)[log.segments[1].txn_index.path.name] != b""
    log.truncate_to(6)  # drops producer 1's marker: its transaction is open again
    assert log.producer_state.ongoing == {2: 1, 4: 2}
    assert all(s.txn_index.path.read_bytes() == b"" for s in log.segments)
    assert log.collect_aborted_transactions(0, 6) == []
    assert log.last_stable_offset == 2
    log.truncate_to(3)  # inside producer 1's first batch: cut at its start
    assert log.log_end_offset == 2
    assert log.producer_state.ongoing == {}
    assert log.last_stable_offset == 2
    # the log goes on
    log.append(data(1, 0), now_ms=0)
    log.append(marker(1, commit=False), now_ms=0, origin=COORD)
    assert log.collect_aborted_transactions(0, 10) == [(1, 2)]


def test_retention_deletes_txnindex_files(tmp_path: Path, logs: OpenedLogs) -> None:
    config = LogConfig(segment_bytes=700, index_interval_bytes=120, retention_ms=-1, retention_bytes=1500)
    p = Producers(logs.open(tmp_path / "t-0", config))
    for _round in range(12):
        p.send(1, 3)
        p.send(2, 2)
        p.end(1, commit=False)
        p.end(2, commit=_round % 2 == 0)
    log = p.log
    log.update_high_watermark(log.log_end_offset)
    names_before = {path.name for path in tmp_path.glob("t-0/*.txnindex")}
    assert len(names_before) == len(log.segments) >= 5
    deleted = log.enforce_retention(0)
    assert deleted >= 2
    names_after = {path.name for path in tmp_path.glob("t-0/*.txnindex")}
    assert names_after == {s.txn_index.path.name for s in log.segments}
    assert len(names_before - names_after) == deleted
    start, end = log.log_start_offset, log.log_end_offset
    assert log.collect_aborted_transactions(start, end) == expected_aborted(p.aborted, start, end)
    assert log.last_stable_offset == end


def test_failed_txnindex_write_leaves_log_unchanged(log: PartitionLog, monkeypatch: pytest.MonkeyPatch) -> None:
    from oncelog.storage import txn_index

    log.append(data(1, 0), now_ms=0)
    segment = log.active_segment
    size, end = segment.size, log.log_end_offset

    def enospc(fd: int, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(txn_index, "write_all", enospc)
    with pytest.raises(KafkaStorageError):
        log.append(marker(1, commit=False), now_ms=0, origin=COORD)
    monkeypatch.undo()
    assert (segment.size, log.log_end_offset, segment.log_path.stat().st_size) == (size, end, size)
    assert log.producer_state.ongoing == {0: 1}
    assert segment.txn_index.entries == []
    log.append(marker(1, commit=False), now_ms=0, origin=COORD)
    assert log.collect_aborted_transactions(0, 3) == [(1, 0)]
