"""PartitionLog: append/read, indexes, rolling, retention, truncation, timestamps, validation."""

from __future__ import annotations

import os
import struct
import threading
from pathlib import Path

import pytest
from oncelog.protocol.records.batch import iter_headers, parse_header
from oncelog.protocol.records.codec import SimpleRecord, encode_batch, iter_records
from oncelog.protocol.records.compression import Compression
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from oncelog.storage.log import PartitionLog, parse_log_dir_name
from support.opened_logs import OpenedLogs

from storage.batches import make_batch

SMALL = LogConfig(segment_bytes=2000, index_interval_bytes=300)


def open_log(logs: OpenedLogs, tmp_path: Path, config: LogConfig = SMALL, name: str = "t-0", **kw) -> PartitionLog:
    return logs.open(tmp_path / name, config, **kw)


def offsets_of(data: bytes) -> list[tuple[int, int]]:
    return [(h.base_offset, h.last_offset) for _, h in iter_headers(data, check_crc=True)]


def fill(log: PartitionLog, n: int, count: int = 3, ts: int = 1000) -> list[int]:
    firsts = []
    for i in range(n):
        firsts.append(log.append(make_batch(count, timestamp=ts + i), now_ms=ts + i).first_offset)
    return firsts


def test_dir_name_split_on_last_dash() -> None:
    assert parse_log_dir_name("my-topic.v1_x-12") == ("my-topic.v1_x", 12)
    with pytest.raises(ValueError):
        parse_log_dir_name("nodash")


def test_append_assigns_offsets_and_rewrites_header(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path)
    batch = bytearray(make_batch(3, base_offset=77))
    batch[12:16] = b"\xff" * 4  # producers send partitionLeaderEpoch -1
    r1 = log.append(batch, now_ms=0)
    r2 = log.append(make_batch(2) + make_batch(4), now_ms=0, leader_epoch=7)
    assert (r1.first_offset, r1.last_offset, r1.duplicate) == (0, 2, False)
    assert (r2.first_offset, r2.last_offset) == (3, 8)
    assert log.log_end_offset == 9
    data = log.read(0, 1 << 20)
    assert offsets_of(data) == [(0, 2), (3, 4), (5, 8)]
    assert [h.partition_leader_epoch for _, h in iter_headers(data, check_crc=True)] == [0, 7, 7]
    assert log.leader_epoch_cache.entries == [(0, 0), (7, 3)]  # where each leader's appends began
    first = parse_header(data)
    # Everything but base offset and leader epoch is the producer's bytes.
    assert data[17 : first.size] == batch[17:]
    assert log.read(9, 100) == b""


def test_read_across_segments_and_offsets_inside_batches(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path)
    fill(log, 60)
    assert len(log.segments) >= 3
    end = log.log_end_offset
    assert end == 180
    for offset in range(0, end):
        data = log.read(offset, 1)  # min_one_batch: exactly the batch holding offset
        [(base, last)] = offsets_of(data)
        assert base <= offset <= last
    everything = log.read(0, 10**9)
    assert offsets_of(everything) == [(3 * i, 3 * i + 2) for i in range(60)]
    # max_bytes trims to whole batches, max_offset stops before batches at or beyond it.
    size = parse_header(everything).size
    assert len(log.read(0, size * 4 + 5)) == size * 4
    assert offsets_of(log.read(10, 10**9, max_offset=20)) == [(9, 11), (12, 14), (15, 17), (18, 20)]
    assert log.read(9, 10**9, max_offset=9) == b""
    assert log.read(0, 5, min_one_batch=False) == b""


def test_out_of_range_reads(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path)
    fill(log, 2)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(7, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_index_entries_every_interval(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path, LogConfig(index_interval_bytes=300))
    fill(log, 40)
    seg = log.active_segment
    size = parse_header(log.read(0, 1)).size
    entries = [seg.offset_index.entry_at(i) for i in range(seg.offset_index.entries)]
    assert entries, "sparse index must have entries"
    # An entry is added once more than interval bytes were appended since the previous one.
    per_entry = 300 // size + 1
    assert entries[0] == (per_entry * 3 + 2, per_entry * size)
    for rel, pos in entries:
        assert parse_header(seg.pread(61, pos)).last_offset == rel
    assert seg.offset_index.path.stat().st_size == 0  # fewer than WRITE_BATCH_BYTES: not written yet
    seg.write_index_entries()
    assert seg.offset_index.path.read_bytes() == seg.offset_index.data
    assert len(seg.offset_index.data) == 8 * len(entries)
    # lookup is a floor
    assert seg.offset_index.lookup(entries[1][0]) == entries[1][1]
    assert seg.offset_index.lookup(entries[1][0] - 1) == entries[0][1]
    assert seg.offset_index.lookup(0) == 0


def test_roll_by_size(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path)
    fill(log, 30)
    for seg in log.segments:
        assert seg.size <= 2000
    names = sorted(p.name for p in (tmp_path / "t-0").glob("*.log"))
    assert names == [f"{s.base_offset:020d}.log" for s in log.segments]
    # a producer snapshot is written at each roll
    snaps = sorted(p.name for p in (tmp_path / "t-0").glob("*.snapshot"))
    assert snaps == [f"{s.base_offset:020d}.snapshot" for s in log.segments[1:]]


def _log_file_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.glob("*.log"))


def test_size_in_bytes_is_the_log_files_bytes(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path)
    assert log.size_in_bytes == 0
    fill(log, 30)
    assert len(log.segments) > 1
    assert log.size_in_bytes == _log_file_bytes(tmp_path / "t-0") > 0  # indexes and snapshots not counted
    log.truncate_to(10)
    assert log.size_in_bytes == _log_file_bytes(tmp_path / "t-0")
    log.close()
    assert logs.open(tmp_path / "t-0", SMALL, clean_shutdown=True).size_in_bytes == _log_file_bytes(tmp_path / "t-0")


@pytest.mark.parametrize(("policy", "rolled"), [(("compact",), True), (("delete",), False)])
def test_max_compaction_lag_rolls_a_compacted_log(
    tmp_path: Path, policy: tuple[str, ...], rolled: bool, logs: OpenedLogs
) -> None:
    """Kafka's LogConfig.maxSegmentMs: a compacted log's active segment rolls once older than max.compaction.lag.ms
    (below segment.ms), so the compactor may clean its records; other logs keep segment.ms."""
    log = open_log(logs, tmp_path, LogConfig(segment_ms=10**9, max_compaction_lag_ms=1000, cleanup_policy=policy))
    log.append(encode_batch([SimpleRecord(b"k", b"v", (), 5000)]), now_ms=5000)
    log.append(encode_batch([SimpleRecord(b"k", b"w", (), 6001)]), now_ms=6001)
    assert [s.base_offset for s in log.segments] == ([0, 1] if rolled else [0])


def test_roll_by_time(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path, LogConfig(segment_ms=1000))
    log.append(make_batch(1, timestamp=5000), now_ms=5000)
    log.append(make_batch(1, timestamp=5500), now_ms=5500)
    assert len(log.segments) == 1
    log.append(make_batch(1, timestamp=6001), now_ms=6001)
    assert [s.base_offset for s in log.segments] == [0, 2]
    log.maybe_roll_for_time(6500)
    assert len(log.segments) == 2
    log.maybe_roll_for_time(7002)
    assert [s.base_offset for s in log.segments] == [0, 2, 3]
    log.maybe_roll_for_time(100000)  # empty active segment: nothing to roll
    assert len(log.segments) == 3


def test_roll_when_index_full(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path, LogConfig(index_interval_bytes=1, max_index_size=24))  # 3 offset entries
    fill(log, 12, count=1)
    for seg in log.segments:
        assert seg.offset_index.entries <= 3
    assert len(log.segments) >= 3
    assert offsets_of(log.read(0, 10**9)) == [(i, i) for i in range(12)]


def test_multi_batch_append_is_all_or_nothing(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path)
    fill(log, 1)
    bad = bytearray(make_batch(2))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        log.append(make_batch(1) + bytes(bad) + make_batch(1), now_ms=0)
    with pytest.raises(InvalidRecordError):
        log.append(make_batch(1) + make_batch(1)[:-3], now_ms=0)  # trailing partial batch
    wrong_magic = bytearray(make_batch(1))
    wrong_magic[16] = 1
    with pytest.raises(InvalidRecordError):
        log.append(make_batch(1) + bytes(wrong_magic), now_ms=0)
    with pytest.raises(InvalidRecordError):
        log.append(b"", now_ms=0)
    with pytest.raises(RecordTooLargeError):
        open_log(logs, tmp_path, LogConfig(max_message_bytes=100), name="u-0").append(
            make_batch(1, value_size=200), now_ms=0
        )
    assert log.log_end_offset == 3
    assert log.active_segment.size == len(make_batch(3))
    assert offsets_of(log.read(0, 10**9)) == [(0, 2)]


def test_offset_for_timestamp(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path)
    for i in range(50):
        log.append(make_batch(2, timestamp=1000 + 10 * i), now_ms=0)
    assert len(log.segments) > 2
    assert log.offset_for_timestamp(0) == (0, 1000)
    assert log.offset_for_timestamp(1000) == (0, 1000)
    assert log.offset_for_timestamp(1001) == (2, 1010)
    assert log.offset_for_timestamp(1250) == (50, 1250)
    assert log.offset_for_timestamp(1251) == (52, 1260)
    assert log.offset_for_timestamp(1490) == (98, 1490)
    assert log.offset_for_timestamp(1491) is None
    # out-of-order timestamps: first batch whose max timestamp is >= target
    log2 = open_log(logs, tmp_path, name="v-0")
    for ts in (100, 500, 200, 600, 300):
        log2.append(make_batch(1, timestamp=ts), now_ms=0)
    assert log2.offset_for_timestamp(250) == (1, 500)
    assert log2.offset_for_timestamp(550) == (3, 600)
    assert log2.max_timestamp_offset() == (3, 600)
    assert log.max_timestamp_offset() == (98, 1490)
    assert open_log(logs, tmp_path, name="empty-0").max_timestamp_offset() is None


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.LZ4])
def test_offset_for_timestamp_answers_the_first_record_that_reaches_it(
    tmp_path: Path, codec: int, logs: OpenedLogs
) -> None:
    """Kafka's FileRecords.searchForTimestamp: the first record of the batch whose timestamp is >= the target, with
    that record's timestamp, not the batch's base offset and max timestamp."""
    log = open_log(logs, tmp_path)
    now = 1_000_000_000_000
    log.append(encode_batch([SimpleRecord(b"k", b"v", (), 10)]), now_ms=now)
    stamps = (1, 999_999_999_999, 5, 1_000_000_000_000)
    records = [SimpleRecord(b"k", b"v", (), ts) for ts in stamps]
    log.append(encode_batch(records, compression=codec), now_ms=now)
    assert log.offset_for_timestamp(999_999_999_999) == (2, 999_999_999_999)
    assert log.offset_for_timestamp(999_999_999_999 + 1) == (4, 1_000_000_000_000)
    assert log.offset_for_timestamp(11) == (2, 999_999_999_999)  # offset 1 (timestamp 1) does not reach 11
    assert log.offset_for_timestamp(1) == (0, 10)
    # ListOffsets -3: the first record carrying the largest timestamp (RecordBatch.offsetOfMaxTimestamp)
    peak = open_log(logs, tmp_path, name="peak-0")
    peak.append(
        encode_batch([SimpleRecord(b"k", b"v", (), ts) for ts in (7, now, 8, now)], compression=codec), now_ms=now
    )
    assert peak.max_timestamp_offset() == (1, now)


def test_retention_by_time(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path, LogConfig(segment_bytes=2000, index_interval_bytes=300, retention_ms=1000))
    for i in range(40):
        log.append(make_batch(3, timestamp=1000 * i), now_ms=1000 * i)
    n = len(log.segments)
    log.update_high_watermark(log.log_end_offset)
    second_base = log.segments[1].base_offset
    limit = log.segments[0].max_timestamp + 1000
    assert log.enforce_retention(limit) == 0  # not older than retention.ms yet
    assert log.enforce_retention(limit + 1) == 1
    assert log.log_start_offset == second_base
    with pytest.raises(OffsetOutOfRangeError):
        log.read(second_base - 1, 100)
    assert offsets_of(log.read(second_base, 1))[0][0] == second_base
    assert not (tmp_path / "t-0" / f"{0:020d}.log").exists()
    assert log.enforce_retention(10**12) == n - 2  # everything but the active segment
    assert len(log.segments) == 1


def test_retention_respects_high_watermark(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path, LogConfig(segment_bytes=2000, retention_ms=0))
    fill(log, 30)
    log.update_high_watermark(log.segments[1].base_offset)
    assert log.enforce_retention(10**12) == 1
    assert log.log_start_offset == log.segments[0].base_offset


def test_retention_by_size(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path, LogConfig(segment_bytes=2000, retention_ms=-1, retention_bytes=3000))
    fill(log, 80)
    log.update_high_watermark(log.log_end_offset)
    deleted = log.enforce_retention(0)
    assert deleted > 0
    total = sum(s.size for s in log.segments)
    assert total >= 3000
    assert total - log.segments[0].size < 3000  # deleting one more would go below retention.bytes
    assert log.log_start_offset == log.segments[0].base_offset
    assert log.enforce_retention(0) == 0


@pytest.mark.parametrize(("policy", "deletes"), [(("compact",), False), (("compact", "delete"), True)])
def test_retention_deletes_only_when_the_cleanup_policy_says_delete(
    tmp_path: Path, policy: tuple[str, ...], deletes: bool, logs: OpenedLogs
) -> None:
    config = LogConfig(segment_bytes=2000, retention_ms=0, retention_bytes=0, cleanup_policy=policy)
    log = open_log(logs, tmp_path, config)
    for i in range(30):  # keyed: a compacted log refuses records without a key
        log.append(encode_batch([SimpleRecord(b"key-%d" % i, bytes(60), (), 1000 + i)]), now_ms=1000 + i)
    log.update_high_watermark(log.log_end_offset)
    segments = len(log.segments)
    assert log.enforce_retention(10**12) == (segments - 1 if deletes else 0)
    assert log.log_start_offset == (log.segments[0].base_offset if deletes else 0)


def test_truncate_to(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path)
    fill(log, 40)
    seg_bases = [s.base_offset for s in log.segments]
    target = seg_bases[2] + 7  # mid-segment, mid-batch (batches hold 3 offsets)
    log.truncate_to(target)
    assert log.log_end_offset == target - 1  # cut at the start of the batch holding the offset
    assert [s.base_offset for s in log.segments] == seg_bases[:3]
    assert offsets_of(log.read(0, 10**9))[-1][1] == target - 2
    reference = open_log(logs, tmp_path, name="ref-0")
    fill(reference, (target - 1) // 3)
    seg, ref = log.active_segment, reference.segments[-1]
    assert seg.size == ref.size
    r = log.append(make_batch(1), now_ms=0)
    assert r.first_offset == target - 1
    log.truncate_to(seg_bases[1])  # exactly on a segment boundary
    assert log.log_end_offset == seg_bases[1]
    assert len(log.segments) == 1
    log.truncate_to(0)
    assert log.log_end_offset == 0 and log.read(0, 100) == b""
    assert log.append(make_batch(2), now_ms=0).first_offset == 0


def test_truncate_rebuilt_index_matches_fresh_appends(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path, LogConfig(index_interval_bytes=200))
    fill(log, 30)
    log.truncate_to(45)
    ref = open_log(logs, tmp_path, LogConfig(index_interval_bytes=200), name="ref-0")
    fill(ref, 15)
    a, b = log.active_segment, ref.active_segment
    assert a.offset_index.data == b.offset_index.data and a.time_index.data == b.time_index.data
    assert a.offset_index.path.read_bytes() == a.offset_index.data  # truncation writes the rebuilt index whole
    b.write_index_entries()
    assert a.offset_index.path.read_bytes() == b.offset_index.path.read_bytes()
    assert a.time_index.path.read_bytes() == b.time_index.path.read_bytes()


def test_index_entries_reach_the_file_in_page_sized_writes_and_at_roll(tmp_path: Path, logs: OpenedLogs) -> None:
    from oncelog.storage.index_file import WRITE_BATCH_BYTES

    log = open_log(logs, tmp_path, LogConfig(segment_bytes=1 << 20, index_interval_bytes=1))  # an entry per batch
    seg = log.active_segment
    per_write = WRITE_BATCH_BYTES // 8
    fill(log, per_write)  # the first batch gets no entry
    assert seg.offset_index.entries == per_write - 1 and seg.offset_index.path.stat().st_size == 0
    fill(log, 1)
    assert seg.offset_index.path.read_bytes() == seg.offset_index.data  # one write of a page of entries
    fill(log, 5)
    assert seg.offset_index.path.stat().st_size == WRITE_BATCH_BYTES
    assert seg.time_index.path.read_bytes() == seg.time_index.data[: seg.time_index.written]
    log.roll()
    assert seg.offset_index.path.read_bytes() == seg.offset_index.data
    assert seg.time_index.path.read_bytes() == seg.time_index.data
    assert log.active_segment is not seg


def test_flush_advances_recovery_point(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path)
    fill(log, 20)
    assert log.recovery_point == 0
    log.flush(10)
    assert log.recovery_point == 10
    log.flush()
    assert log.recovery_point == log.log_end_offset
    log.truncate_to(5)
    assert log.recovery_point <= 5


def test_flush_data_makes_data_durable_without_moving_the_recovery_point(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path, LogConfig(segment_bytes=2000))
    fill(log, 40)
    assert len(log.segments) > 1
    log.flush_data(25)
    assert (log.durable_offset, log.recovery_point) == (25, 0)
    log.flush_data()
    assert log.durable_offset == log.log_end_offset
    log.flush(10)
    assert (log.recovery_point, log.durable_offset) == (10, log.log_end_offset)
    log.truncate_to(5)
    assert log.durable_offset <= 5 and log.recovery_point <= 5


def test_sync_plan_names_only_the_segments_holding_unsynced_offsets(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path, LogConfig(segment_bytes=2000))
    fill(log, 60)
    segments = log.segments
    assert len(segments) > 3

    def planned(up_to: int | None = None) -> list[int]:
        """Base offsets of the segments whose files the plan would sync, in plan order."""
        plan = log.sync_plan(up_to, data_only=True)
        assert plan is not None
        inodes = {os.fstat(segment.fd).st_ino: segment.base_offset for segment in segments}
        try:
            return [inodes[os.fstat(fd).st_ino] for fd in plan.fds]
        finally:
            for fd in plan.fds:
                os.close(fd)

    assert planned() == [s.base_offset for s in segments]  # nothing synced yet: every segment, oldest first
    second = segments[1]
    assert planned(second.base_offset + 1) == [s.base_offset for s in segments[:2]]
    log.flush_data(second.next_offset)  # the first two segments are durable
    assert planned() == [s.base_offset for s in segments[2:]]
    log.flush_data(segments[-1].base_offset + 1)
    assert planned() == [segments[-1].base_offset]
    log.flush_data()
    assert log.sync_plan(data_only=True) is None


def test_concurrent_flush_and_appends(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path, LogConfig(segment_bytes=4000, index_interval_bytes=300, retention_ms=0))
    errors: list[BaseException] = []
    stop = threading.Event()
    points: list[int] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
                points.append(log.recovery_point)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=flusher)
    thread.start()
    try:
        for i in range(400):
            log.append(make_batch(2, timestamp=i), now_ms=i)
            if i % 50 == 49:
                log.update_high_watermark(log.log_end_offset)
                log.enforce_retention(10**9)
    finally:
        stop.set()
        thread.join()
    assert not errors
    assert points == sorted(points) and points[-1] > 0
    log.flush()
    assert log.recovery_point == log.log_end_offset == 800


def test_batch_header_rewrite_keeps_crc_valid(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path)
    fill(log, 5)
    data = log.read(0, 10**9)
    assert len(list(iter_headers(data, check_crc=True))) == 5
    assert struct.unpack_from(">q", data, 0)[0] == 0


def test_failed_write_leaves_log_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logs: OpenedLogs) -> None:
    import errno
    import os

    from oncelog.storage import index_file, segment
    from oncelog.storage.errors import KafkaStorageError

    monkeypatch.setattr(index_file, "WRITE_BATCH_BYTES", 1)  # every append writes its index entries
    config = LogConfig(index_interval_bytes=150)
    log = open_log(logs, tmp_path, config)
    fill(log, 10)
    seg = log.active_segment

    def state() -> tuple:
        files = seg.offset_index.path.read_bytes(), seg.time_index.path.read_bytes()
        memory = bytes(seg.offset_index.data), bytes(seg.time_index.data)
        return seg.size, log.log_end_offset, files, memory

    before = state()

    def partial_then_enospc(fd: int, data: bytes) -> None:
        os.write(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    def partial_vectored_then_enospc(fd: int, pieces: list) -> None:
        partial_then_enospc(fd, b"".join(bytes(piece) for piece in pieces))

    monkeypatch.setattr(segment, "write_all_vectored", partial_vectored_then_enospc)
    with pytest.raises(KafkaStorageError):
        log.append(make_batch(3, timestamp=2000) + make_batch(3, timestamp=2001), now_ms=0)
    monkeypatch.undo()
    monkeypatch.setattr(index_file, "WRITE_BATCH_BYTES", 1)
    monkeypatch.setattr(index_file, "write_all", partial_then_enospc)
    with pytest.raises(KafkaStorageError):
        log.append(make_batch(3, timestamp=2000) + make_batch(3, timestamp=2001) + make_batch(3), now_ms=0)
    monkeypatch.undo()
    assert state() == before
    assert os.path.getsize(seg.log_path) == seg.size
    fill(log, 10)
    ref = open_log(logs, tmp_path, config, name="ref-0")
    fill(ref, 10)
    fill(ref, 10)
    assert log.read(0, 10**9) == ref.read(0, 10**9)
    seg.write_index_entries()
    ref.active_segment.write_index_entries()
    assert seg.offset_index.path.read_bytes() == ref.active_segment.offset_index.path.read_bytes()


def test_failed_write_with_index_entries_waiting_keeps_the_files_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, logs: OpenedLogs
) -> None:
    import errno

    from oncelog.storage import segment
    from oncelog.storage.errors import KafkaStorageError

    log = open_log(logs, tmp_path, LogConfig(index_interval_bytes=150))
    fill(log, 10)
    seg = log.active_segment
    waiting = bytes(seg.offset_index.data)
    assert waiting and seg.offset_index.path.stat().st_size == 0

    def enospc(fd: int, data: bytes) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(segment, "write_all_vectored", enospc)
    with pytest.raises(KafkaStorageError):
        log.append(make_batch(3, timestamp=2000) + make_batch(3, timestamp=2001), now_ms=0)
    monkeypatch.undo()
    assert seg.offset_index.data == waiting and seg.offset_index.path.stat().st_size == 0  # not zero-filled
    seg.write_index_entries()
    assert seg.offset_index.path.read_bytes() == waiting


def test_update_config_applies_without_reopening(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path, LogConfig(segment_bytes=1 << 20, index_interval_bytes=300, retention_ms=-1))
    fill(log, 5)
    big = make_batch(30)
    log.append(big, now_ms=0)
    assert len(log.segments) == 1
    log.update_config(
        LogConfig(
            segment_bytes=300,
            index_interval_bytes=100,
            max_message_bytes=len(big) - 1,
            retention_ms=1000,
            producer_id_expiration_ms=5,
        )
    )
    with pytest.raises(RecordTooLargeError):
        log.append(big, now_ms=0)
    fill(log, 1, ts=5000)  # the full segment rolls at the next append
    assert [s.base_offset for s in log.segments] == [0, 45]
    assert log.segments[0].config.index_interval_bytes == 300  # an existing segment keeps its file layout
    assert log.segments[1].config.index_interval_bytes == 100
    assert log.producer_state.producer_id_expiration_ms == 5
    log.update_high_watermark(log.log_end_offset)
    assert log.enforce_retention(10_000) == 1  # the new retention.ms


def test_log_append_time_stamps_each_batch_with_the_append_time(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path, LogConfig(message_timestamp_type="LogAppendTime"))
    created = make_batch(3, timestamp=1000)
    first = log.append(created, now_ms=50_000)
    second = log.append(make_batch(2, timestamp=2000) + make_batch(1, timestamp=3000), now_ms=60_000)
    assert (first.log_append_time, second.log_append_time) == (50_000, 60_000)
    assert second.max_timestamp == 60_000
    headers = [h for _, h in iter_headers(log.read(0, 1 << 20), check_crc=True)]  # the CRCs were recomputed
    assert [(h.timestamp_type, h.max_timestamp) for h in headers] == [(1, 50_000), (1, 60_000), (1, 60_000)]
    stored = log.read(0, 1 << 20)[: headers[0].size]
    assert stored[61:] == created[61:]  # the records are the producer's bytes
    assert log.active_segment.max_timestamp == 60_000  # what retention and ListOffsets by time go by

    plain = open_log(logs, tmp_path, LogConfig(), name="c-0")
    assert plain.append(make_batch(1, timestamp=1000), now_ms=50_000).log_append_time == -1
    assert parse_header(plain.read(0, 1 << 20)).timestamp_type == 0


@pytest.mark.parametrize(("target", "codec"), [("zstd", 4), ("uncompressed", 0), ("lz4", 3)])
def test_compression_type_recompresses_batches_in_another_codec(
    tmp_path: Path, target: str, codec: int, logs: OpenedLogs
) -> None:
    log = open_log(logs, tmp_path, LogConfig(compression_type=target))
    records = [SimpleRecord(b"k%d" % i, b"value %d" % i * 20, [("h", b"x")], 5000 + i) for i in range(5)]
    sent = [
        encode_batch(records, compression=1),  # gzip
        encode_batch(records[:2], compression=codec),  # already in the target codec
        encode_batch(records[2:], producer_id=9, producer_epoch=2, base_sequence=0, compression=2),  # snappy
    ]
    for data in sent:
        log.append(data, now_ms=0)

    stored = log.read(0, 1 << 20)
    batches = [(pos, h) for pos, h in iter_headers(stored, check_crc=True)]
    assert [h.compression for _, h in batches] == [codec, codec, codec]
    assert stored[batches[1][0] + 61 : batches[1][0] + batches[1][1].size] == sent[1][61:]  # left as it came
    last = batches[2][1]
    assert (last.producer_id, last.producer_epoch, last.base_sequence, last.last_offset) == (9, 2, 0, 9)
    read = [(r.offset, r.key, r.value, r.headers, r.timestamp) for _, r in iter_records(stored)]
    want = [(r.key, r.value, r.headers, r.timestamp) for r in records + records[:2] + records[2:]]
    assert [row[1:] for row in read] == want and [row[0] for row in read] == list(range(10))
    assert log.producer_state.last_entry(9).last_seq == 2


def test_compression_type_producer_keeps_every_batch_as_sent(tmp_path: Path, logs: OpenedLogs) -> None:
    log = open_log(logs, tmp_path, LogConfig())
    sent = encode_batch([SimpleRecord(b"k", b"v", (), 1000)], compression=1)
    log.append(sent, now_ms=0)
    assert log.read(0, 1 << 20)[17:] == sent[17:]


def test_vectored_writes_go_on_after_short_writes_and_past_iov_max(tmp_path: Path, monkeypatch) -> None:
    from oncelog.storage import index_file

    real_writev, calls = os.writev, []

    def short_writev(fd: int, buffers: list) -> int:
        """Writes only the first half of what it is given, as a write near ENOSPC may."""
        calls.append(len(buffers))
        given = b"".join(bytes(b) for b in buffers)
        return real_writev(fd, [given[: max(1, len(given) // 2)]])

    monkeypatch.setattr(index_file.os, "writev", short_writev)
    monkeypatch.setattr(index_file, "_IOV_MAX", 4)
    pieces = [b"%04d" % i for i in range(50)] + [b"", memoryview(b"tail")]
    path = tmp_path / "v"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        index_file.write_all_vectored(fd, pieces)
    finally:
        os.close(fd)
    assert path.read_bytes() == b"".join(bytes(p) for p in pieces)
    assert max(calls) == 4
