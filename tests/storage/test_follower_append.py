"""PartitionLog.append_as_follower and the log's leader-epoch cache: batches copied from a leader keep their offsets,
timestamps and epochs; producer state is rebuilt from them; ``leader-epoch-checkpoint`` follows appends,
truncation, log start changes, restarts and crashes."""

from __future__ import annotations

import struct
from itertools import pairwise
from pathlib import Path

import pytest
from oncelog.protocol.records import ControlType, encode_control_batch
from oncelog.protocol.records.batch import PARTITION_LEADER_EPOCH_POS, iter_headers
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import (
    CorruptRecordError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    UnexpectedAppendOffsetError,
)
from oncelog.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT
from oncelog.storage.log import AppendOrigin, PartitionLog
from support.killed_log import crash
from support.opened_logs import OpenedLogs

from storage.batches import make_batch, producer_data, txn_marker

CONFIG = LogConfig(segment_bytes=1000, index_interval_bytes=200)
COORD = AppendOrigin.COORDINATOR


def stamped(records: bytes, epochs: dict[int, int]) -> bytes:
    """``records`` with the batch starting at each offset of ``epochs`` (and those after it) stamped with its epoch,
    as leaders of successive epochs would have written them (the field is outside the CRC)."""
    out = bytearray(records)
    epoch = -1
    for pos, header in iter_headers(records):
        epoch = epochs.get(header.base_offset, epoch)
        struct.pack_into(">i", out, pos + PARTITION_LEADER_EPOCH_POS, epoch)
    return bytes(out)


def everything(log: PartitionLog) -> bytes:
    return log.read(log.log_start_offset, 1 << 24, max_offset=log.log_end_offset)


def open_log(logs: OpenedLogs, directory: Path, **kw) -> PartitionLog:
    return logs.open(directory, CONFIG, **kw)


@pytest.fixture
def leader(tmp_path: Path, logs: OpenedLogs) -> PartitionLog:
    return open_log(logs, tmp_path / "leader" / "t-0")


@pytest.fixture
def follower(tmp_path: Path, logs: OpenedLogs) -> PartitionLog:
    return open_log(logs, tmp_path / "follower" / "t-0")


def test_follower_keeps_offsets_timestamps_and_epochs_and_records_the_epochs(
    leader: PartitionLog, follower: PartitionLog
) -> None:
    for i in range(12):
        leader.append(make_batch(3, timestamp=5000 + i, value_size=40), now_ms=5000 + i)
    records = stamped(everything(leader), {0: 0, 9: 2, 21: 5})
    positions = [*[pos for pos, _ in iter_headers(records)][::4], len(records)]
    results = [follower.append_as_follower(records[a:b], now_ms=0) for a, b in pairwise(positions)]
    assert [(r.first_offset, r.last_offset, r.duplicate) for r in results] == [
        (0, 11, False),
        (12, 23, False),
        (24, 35, False),
    ]
    assert [r.max_timestamp for r in results] == [5003, 5007, 5011]
    assert follower.log_end_offset == 36
    assert everything(follower) == records  # byte for byte: offsets, timestamps, epochs, CRCs
    assert len(follower.segments) > 1  # rolled by segment.bytes as a leader's appends do
    assert follower.high_watermark == 0  # the leader tells the follower its high watermark
    assert follower.leader_epoch_cache.entries == [(0, 0), (2, 9), (5, 21)]
    assert (follower.directory / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n3\n0 0\n2 9\n5 21\n"


def test_follower_appends_in_pieces_as_a_fetcher_does(leader: PartitionLog, follower: PartitionLog) -> None:
    for i in range(6):
        leader.append(make_batch(2, value_size=30), now_ms=i)
    records = stamped(everything(leader), {0: 1, 6: 3})
    headers = list(iter_headers(records))
    cut = headers[3][0]
    follower.append_as_follower(records[:cut], now_ms=0)
    assert follower.leader_epoch_cache.entries == [(1, 0)]
    follower.append_as_follower(records[cut:], now_ms=0)
    assert everything(follower) == records
    assert follower.leader_epoch_cache.entries == [(1, 0), (3, 6)]


def test_a_partial_batch_at_the_end_is_left_for_the_next_fetch(leader: PartitionLog, follower: PartitionLog) -> None:
    for _ in range(3):
        leader.append(make_batch(2), now_ms=0)
    records = everything(leader)
    result = follower.append_as_follower(records[:-5], now_ms=0)
    assert (result.first_offset, result.last_offset) == (0, 3)
    assert follower.log_end_offset == 4
    nothing = follower.append_as_follower(records[-20:], now_ms=0)  # not even a whole header
    assert (nothing.first_offset, nothing.last_offset) == (4, 3)
    assert follower.log_end_offset == 4


def test_batches_below_the_log_end_or_out_of_order_are_refused(leader: PartitionLog, follower: PartitionLog) -> None:
    for _ in range(4):
        leader.append(make_batch(2), now_ms=0)
    records = everything(leader)
    batches = [records[pos : pos + h.size] for pos, h in iter_headers(records)]
    follower.append_as_follower(batches[0] + batches[1], now_ms=0)
    with pytest.raises(UnexpectedAppendOffsetError, match="less than the next offset 4"):
        follower.append_as_follower(batches[1] + batches[2], now_ms=0)  # overlaps what it holds
    with pytest.raises(UnexpectedAppendOffsetError, match="Out of order offsets"):
        follower.append_as_follower(batches[3] + batches[2], now_ms=0)
    assert follower.log_end_offset == 4
    assert everything(follower) == batches[0] + batches[1]
    # A gap above the log end is a compacted leader's (batches removed whole): kept as Kafka does.
    follower.append_as_follower(batches[3], now_ms=0)
    assert follower.log_end_offset == 8
    assert [h.base_offset for _, h in iter_headers(everything(follower))] == [0, 2, 6]


def test_a_corrupt_batch_is_refused_and_nothing_is_written(leader: PartitionLog, follower: PartitionLog) -> None:
    leader.append(make_batch(2) + make_batch(2), now_ms=0)
    records = bytearray(everything(leader))
    records[-3] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(bytes(records), now_ms=0)
    assert follower.log_end_offset == 0
    assert follower.size_in_bytes == 0


def test_idempotent_producer_state_follows_so_a_retry_after_failover_is_a_duplicate(
    leader: PartitionLog, follower: PartitionLog
) -> None:
    leader.append(producer_data(7, 0, 3, txn=False), now_ms=0)
    leader.append(make_batch(2), now_ms=0)
    last = leader.append(producer_data(7, 3, 2, txn=False), now_ms=0)
    follower.append_as_follower(everything(leader), now_ms=0)

    # The follower becomes the leader; the producer retries the batch it got no answer for.
    retry = follower.append(producer_data(7, 3, 2, txn=False), now_ms=0)
    assert retry.duplicate
    assert (retry.first_offset, retry.last_offset) == (last.first_offset, last.last_offset)
    assert follower.log_end_offset == leader.log_end_offset
    with pytest.raises(OutOfOrderSequenceError):
        follower.append(producer_data(7, 9, 1, txn=False), now_ms=0)
    assert follower.append(producer_data(7, 5, 1, txn=False), now_ms=0).first_offset == leader.log_end_offset


def test_producer_state_is_taken_without_checks_as_the_leader_checked(
    leader: PartitionLog, follower: PartitionLog
) -> None:
    """The leader's log may hold what a client append would be refused: a sequence gap where compaction removed a
    batch, or (Kafka only logs them for replication) an older producer or coordinator epoch. Nothing is refused."""
    for seq in (0, 2, 4):
        leader.append(producer_data(3, seq, 2, txn=False), now_ms=0)
    records = everything(leader)
    batches = [records[pos : pos + h.size] for pos, h in iter_headers(records)]
    follower.append_as_follower(batches[0] + batches[2], now_ms=0)  # sequences 0-1 then 4-5
    assert follower.producer_state.last_entry(3).last_seq == 5
    bumped = make_batch(1, base_offset=7, producer_id=3, producer_epoch=2, base_sequence=0)
    follower.append_as_follower(bumped, now_ms=0)
    older = make_batch(1, base_offset=8, producer_id=3, producer_epoch=1, base_sequence=0)
    follower.append_as_follower(older, now_ms=0)
    assert follower.producer_state.last_entry(3).epoch == 1
    fenced = encode_control_batch(
        ControlType.ABORT, producer_id=3, producer_epoch=1, coordinator_epoch=7, timestamp_ms=0, base_offset=9
    )
    zombie = encode_control_batch(
        ControlType.ABORT, producer_id=3, producer_epoch=1, coordinator_epoch=2, timestamp_ms=0, base_offset=10
    )
    follower.append_as_follower(fenced + zombie, now_ms=0)
    assert follower.producer_state.last_entry(3).coordinator_epoch == 2
    assert follower.log_end_offset == 11


def test_transactions_and_markers_give_the_follower_the_leaders_last_stable_offset_and_txn_index(
    leader: PartitionLog, follower: PartitionLog, logs: OpenedLogs
) -> None:
    leader.append(producer_data(1, 0, 2), now_ms=0)  # 0-1
    leader.append(producer_data(2, 0, 2), now_ms=0)  # 2-3
    leader.append(make_batch(2), now_ms=0)  # 4-5
    leader.append(txn_marker(1, commit=False), now_ms=0, origin=COORD)  # 6: abort of pid 1
    leader.append(producer_data(1, 2, 1), now_ms=0)  # 7: pid 1's next transaction, open
    records = everything(leader)
    follower.append_as_follower(records, now_ms=0)
    follower.update_high_watermark(follower.log_end_offset)
    leader.update_high_watermark(leader.log_end_offset)
    assert follower.last_stable_offset == leader.last_stable_offset == 2  # pid 2's open transaction
    assert follower.collect_aborted_transactions(0, 8) == [(1, 0)]
    assert follower.collect_aborted_transactions(0, 8) == leader.collect_aborted_transactions(0, 8)

    leader.append(txn_marker(2, commit=True), now_ms=0, origin=COORD)  # 8
    follower.append_as_follower(leader.read(8, 1 << 20), now_ms=0)
    follower.update_high_watermark(follower.log_end_offset)
    assert follower.last_stable_offset == 7  # pid 1's second transaction is still open
    with pytest.raises(InvalidTxnStateError):  # as leader it holds pid 1's open transaction
        follower.append(producer_data(1, 3, 1, txn=False), now_ms=0)
    # The state survives a restart of the follower (snapshot + replay).
    follower.close()
    again = open_log(logs, follower.directory, clean_shutdown=True)
    assert again.last_stable_offset == 7
    assert again.collect_aborted_transactions(0, 9) == [(1, 0)]


def test_checkpoint_survives_restart_and_follows_truncation(
    leader: PartitionLog, follower: PartitionLog, logs: OpenedLogs
) -> None:
    for i in range(10):
        leader.append(producer_data(4, 2 * i, 2, txn=False), now_ms=0)
    records = stamped(everything(leader), {0: 0, 6: 1, 12: 4})
    follower.append_as_follower(records, now_ms=0)
    follower.close()
    follower = open_log(logs, follower.directory, clean_shutdown=True)
    assert follower.leader_epoch_cache.entries == [(0, 0), (1, 6), (4, 12)]

    follower.truncate_to(10)  # KIP-101: the divergent tail goes, with its epochs
    assert follower.log_end_offset == 10
    assert follower.leader_epoch_cache.entries == [(0, 0), (1, 6)]
    assert (follower.directory / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n2\n0 0\n1 6\n"
    # Producer state is that of the log as cut: the last batch kept is the latest, a cut one is no duplicate.
    assert follower.producer_state.last_entry(4).last_seq == 9
    assert follower.append(producer_data(4, 8, 2, txn=False), now_ms=0).duplicate
    assert not follower.append(producer_data(4, 10, 2, txn=False), now_ms=0).duplicate
    follower.truncate_to(6)
    assert follower.leader_epoch_cache.entries == [(0, 0)]
    follower.close()
    assert open_log(logs, follower.directory, clean_shutdown=True).leader_epoch_cache.entries == [(0, 0)]


def test_raising_the_log_start_moves_the_epoch_in_force_there(
    leader: PartitionLog, follower: PartitionLog, logs: OpenedLogs
) -> None:
    for _ in range(12):
        leader.append(make_batch(3, value_size=40), now_ms=0)
    follower.append_as_follower(stamped(everything(leader), {0: 0, 9: 1, 24: 2}), now_ms=0)
    follower.update_high_watermark(follower.log_end_offset)
    follower.advance_log_start_offset(12)
    assert follower.leader_epoch_cache.entries == [(1, 12), (2, 24)]
    follower.delete_segments_below_start()
    follower.close()
    again = open_log(logs, follower.directory, clean_shutdown=True, log_start_offset=12)
    assert again.leader_epoch_cache.entries == [(1, 12), (2, 24)]


def test_a_missing_checkpoint_is_rebuilt_from_the_batches(
    leader: PartitionLog, follower: PartitionLog, logs: OpenedLogs
) -> None:
    for _ in range(8):
        leader.append(make_batch(2), now_ms=0)
    follower.append_as_follower(stamped(everything(leader), {0: -1, 4: 3, 10: 7}), now_ms=0)
    follower.close()
    checkpoint = follower.directory / LEADER_EPOCH_CHECKPOINT
    checkpoint.unlink()
    again = open_log(logs, follower.directory, clean_shutdown=True)
    assert again.leader_epoch_cache.entries == [(3, 4), (7, 10)]
    assert checkpoint.read_text() == "0\n2\n3 4\n7 10\n"

    # A log written before epochs were stamped gets an empty checkpoint, so that it is not scanned again.
    old = open_log(logs, leader.directory.parent.parent / "old" / "t-0")
    old.append_as_follower(stamped(everything(leader), {0: -1}), now_ms=0)
    old.close()
    assert not (old.directory / LEADER_EPOCH_CHECKPOINT).exists()
    assert open_log(logs, old.directory, clean_shutdown=True).leader_epoch_cache.entries == []
    assert (old.directory / LEADER_EPOCH_CHECKPOINT).read_text() == "0\n0\n"


def test_epochs_written_before_data_lost_in_a_crash_are_dropped_on_recovery(
    leader: PartitionLog, follower: PartitionLog, logs: OpenedLogs
) -> None:
    for _ in range(6):
        leader.append(make_batch(2), now_ms=0)
    records = stamped(everything(leader), {0: 0, 8: 2})
    headers = list(iter_headers(records))
    follower.append_as_follower(records[: headers[4][0]], now_ms=0)  # offsets 0-7, epoch 0
    follower.flush()
    follower.append_as_follower(records[headers[4][0] :], now_ms=0)  # offsets 8-11, epoch 2: not flushed
    assert follower.leader_epoch_cache.entries == [(0, 0), (2, 8)]
    end = follower.segments[-1].size
    crash(follower)
    # The unflushed tail never reached the disk.
    with open(follower.segments[-1].log_path, "r+b") as f:
        f.truncate(end - sum(h.size for _, h in headers[4:]))
    again = open_log(logs, follower.directory, recovery_point=8)
    assert again.log_end_offset == 8
    assert again.leader_epoch_cache.entries == [(0, 0)]


def test_the_leader_stamps_its_epoch_in_client_and_coordinator_batches(
    leader: PartitionLog, follower: PartitionLog
) -> None:
    leader.append(producer_data(1, 0, 2), now_ms=0)  # the single node's epoch 0
    leader.append(make_batch(2), now_ms=0, leader_epoch=3)
    leader.append(txn_marker(1, commit=True), now_ms=0, origin=COORD, leader_epoch=3)
    leader.append(make_batch(1), now_ms=0, leader_epoch=4)
    records = everything(leader)
    assert [(h.base_offset, h.partition_leader_epoch) for _, h in iter_headers(records, check_crc=True)] == [
        (0, 0),
        (2, 3),
        (4, 3),
        (5, 4),
    ]
    assert leader.leader_epoch_cache.entries == [(0, 0), (3, 2), (4, 5)]
    follower.append_as_follower(records, now_ms=0)
    assert follower.leader_epoch_cache.entries == leader.leader_epoch_cache.entries
    assert (leader.directory / LEADER_EPOCH_CHECKPOINT).read_bytes() == (
        follower.directory / LEADER_EPOCH_CHECKPOINT
    ).read_bytes()


def test_a_new_leader_records_its_epoch_at_the_log_end_once(leader: PartitionLog) -> None:
    leader.append(make_batch(3), now_ms=0)
    leader.maybe_assign_epoch_start(2)  # became leader of epoch 2 at offset 3 (Kafka's makeLeader)
    leader.maybe_assign_epoch_start(2)
    leader.maybe_assign_epoch_start(1)  # older: nothing
    assert leader.leader_epoch_cache.entries == [(0, 0), (2, 3)]
    leader.append(make_batch(1), now_ms=0, leader_epoch=2)
    assert leader.leader_epoch_cache.entries == [(0, 0), (2, 3)]
    assert leader.leader_epoch_cache.end_offset_for(0, leader.log_end_offset) == (0, 3)


def test_after_a_crash_the_followers_producer_state_and_epochs_are_recovered_from_its_batches(
    leader: PartitionLog, follower: PartitionLog, logs: OpenedLogs
) -> None:
    leader.append(producer_data(1, 0, 2), now_ms=0)  # 0-1
    leader.append(producer_data(2, 0, 2), now_ms=0, leader_epoch=1)  # 2-3
    leader.append(txn_marker(1, commit=False), now_ms=0, origin=COORD, leader_epoch=1)  # 4: pid 1 aborted
    leader.append(producer_data(3, 0, 1, txn=False), now_ms=0, leader_epoch=1)  # 5
    follower.append_as_follower(everything(leader), now_ms=0)
    follower.flush()  # the data is durable, not the snapshot or the cache's later changes
    crash(follower)
    (follower.directory / LEADER_EPOCH_CHECKPOINT).unlink()
    again = open_log(logs, follower.directory, recovery_point=0)  # every batch scanned again
    again.update_high_watermark(again.log_end_offset)
    assert again.log_end_offset == 6
    assert again.leader_epoch_cache.entries == [(0, 0), (1, 2)]
    assert again.last_stable_offset == 2  # pid 2's transaction is open
    assert again.collect_aborted_transactions(0, 6) == [(1, 0)]
    assert again.append(producer_data(3, 0, 1, txn=False), now_ms=0).duplicate
