"""Log compaction (storage.cleaner): what a pass keeps, that offsets and reads survive it, and that a crash at any
step leaves either the old segments or the compacted ones, never a mix."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from oncelog.protocol.records.batch import parse_header
from oncelog.protocol.records.codec import SimpleRecord, encode_batch, iter_records
from oncelog.storage import cleaner, cleaner_process
from oncelog.storage.append_origin import AppendOrigin
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import InvalidRecordError, StorageError
from oncelog.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT
from oncelog.storage.log import PartitionLog
from support.killed_log import crash
from support.opened_logs import OpenedLogs

COMPACT = LogConfig(segment_bytes=1200, index_interval_bytes=200, cleanup_policy=("compact",))
DAY_MS = 86_400_000
NOW_MS = 10 * DAY_MS


def append(log: PartitionLog, records: list[tuple[bytes | None, bytes | None]], ts: int = NOW_MS, **batch) -> int:
    """Append one batch of (key, value) records; its first offset."""
    data = encode_batch([SimpleRecord(k, v, (), ts) for k, v in records], **batch)
    origin = AppendOrigin.COORDINATOR if batch.get("transactional") else AppendOrigin.CLIENT
    return log.append(data, now_ms=ts, origin=origin).first_offset


def contents(log: PartitionLog, start: int | None = None) -> list[tuple[int, bytes | None, bytes | None]]:
    """The data records (markers left out)."""
    data = log.read(log.log_start_offset if start is None else start, 1 << 30, min_one_batch=True)
    return [(r.offset, r.key, r.value) for header, r in iter_records(data) if not header.is_control]


def marker_offsets(log: PartitionLog) -> list[int]:
    data = log.read(log.log_start_offset, 1 << 30, min_one_batch=True)
    return [header.base_offset for header, _ in iter_records(data) if header.is_control]


def compact(log: PartitionLog, *, now_ms: int = NOW_MS, first_dirty: int = 0) -> list[cleaner.CleanedGroup]:
    """One pass, installed, as the broker runs it (below the last stable offset); the groups it rewrote."""
    log.update_high_watermark(log.log_end_offset)
    found = cleaner.compaction_range(log.segments, log.last_stable_offset, first_dirty)
    if found is None:
        return []
    transactions = log.compaction_transactions(found[1])
    groups = cleaner.clean_range(*found, log.config, now_ms=now_ms, transactions=transactions)
    for group in groups:
        log.replace_segments(group)
    return groups


def expected_after(
    written: list[tuple[int, bytes | None, bytes | None]], cleanable_end: int
) -> list[tuple[int, bytes | None, bytes | None]]:
    """The model: below ``cleanable_end`` only each key's latest record there stays."""
    latest = {key: offset for offset, key, _ in written if offset < cleanable_end and key is not None}
    return [
        (offset, key, value)
        for offset, key, value in written
        if offset >= cleanable_end or (key is not None and latest[key] == offset)
    ]


def files(log: PartitionLog) -> set[str]:
    return {
        p.name
        for p in log.directory.iterdir()
        if not p.name.endswith(".snapshot") and p.name != LEADER_EPOCH_CHECKPOINT
    }


def segment_files(log: PartitionLog) -> set[str]:
    suffixes = (".log", ".index", ".timeindex", ".txnindex")
    return {f"{s.base_offset:020d}{suffix}" for s in log.segments for suffix in suffixes}


def write_random(
    log: PartitionLog, batches: int, seed: int, keys: int = 12
) -> list[tuple[int, bytes | None, bytes | None]]:
    rng = random.Random(seed)
    written = []
    for _ in range(batches):
        records = []
        for _ in range(rng.randint(1, 4)):
            key = f"key-{rng.randrange(keys)}".encode()
            value = None if rng.random() < 0.05 else f"value-{rng.random():.6f}".encode()  # a new tombstone stays
            records.append((key, value))
        first = append(log, records, compression=rng.choice((0, 1)))
        written += [(first + i, k, v) for i, (k, v) in enumerate(records)]
    return written


@pytest.mark.parametrize("seed", range(4))
def test_a_pass_keeps_each_keys_latest_record_at_its_offset(tmp_path: Path, seed: int, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "c-0", COMPACT)
    written = write_random(log, 150, seed)
    segments_before = len(log.segments)
    active_base = log.active_segment.base_offset

    done = compact(log)

    assert done and sum(g.records_removed for g in done) > 0
    want = expected_after(written, active_base)
    assert contents(log) == want
    assert len(log.segments) < segments_before / 2  # merged by what each keeps
    assert log.log_end_offset == written[-1][0] + 1
    assert files(log) == segment_files(log)  # no stray .cleaned / .swap, no file of a merged segment
    # A read from an offset that went starts at the next record kept.
    gone = next(o for o, _, _ in written if o not in {w[0] for w in want})
    assert contents(log, gone)[0][0] == min(o for o, _, _ in want if o > gone)
    # The files are the log: a recovery from scratch and a trusted reload read the same.
    log.close()
    for clean in (False, True):
        again = logs.open(log.directory, COMPACT, recovery_point=0, clean_shutdown=clean)
        assert contents(again) == want
        again.close()


def test_a_second_pass_waits_for_a_newly_closed_segment(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "c-0", COMPACT)
    write_random(log, 100, seed=7)
    first = compact(log)
    upper = first[-1].upper
    assert compact(log, first_dirty=upper) == []  # nothing closed since
    while log.active_segment.base_offset == upper:
        append(log, [(b"key-1", b"more")])
    assert compact(log, first_dirty=upper) != []


def test_tombstones_go_once_older_than_delete_retention(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "t-0", COMPACT)
    append(log, [(b"a", b"1"), (b"b", b"1")], ts=NOW_MS - 2 * DAY_MS)
    append(log, [(b"a", None)], ts=NOW_MS - 2 * DAY_MS)  # the tombstone of a
    log.roll()
    append(log, [(b"c", b"1")])

    compact(log, now_ms=NOW_MS - 2 * DAY_MS + 1000)  # the tombstone is new: it stays, the record it deletes goes
    assert contents(log) == [(1, b"b", b"1"), (2, b"a", None), (3, b"c", b"1")]
    compact(log, now_ms=NOW_MS)  # older than delete.retention.ms (1 day): gone
    assert contents(log) == [(1, b"b", b"1"), (3, b"c", b"1")]


def end_txn(log: PartitionLog, producer_id: int, *, commit: bool, ts: int = NOW_MS, epoch: int = 0) -> int:
    """Append the coordinator's COMMIT or ABORT marker for ``producer_id``; its offset."""
    control_key = b"\x00\x00\x00" + (b"\x01" if commit else b"\x00")
    data = encode_batch([SimpleRecord(control_key, b"\x00\x00\x00\x00\x00\x00", (), ts)],
                        producer_id=producer_id, producer_epoch=epoch, transactional=True, control=True)  # fmt: skip
    return log.append(data, now_ms=ts, origin=AppendOrigin.COORDINATOR).first_offset


def test_a_tombstone_stays_while_a_producers_last_batch_holds_its_key(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "g-0", COMPACT)
    old = NOW_MS - 2 * DAY_MS
    append(log, [(b"g", b"committed offset")], ts=old, producer_id=5, producer_epoch=0, base_sequence=0,
           transactional=True)  # fmt: skip
    end_txn(log, 5, commit=True, ts=old)
    append(log, [(b"g", None), (b"h", b"1")], ts=old)  # g's tombstone: older than delete.retention.ms
    append(log, [(b"h", None)], ts=old)  # h's: nothing else holds h
    log.roll()
    append(log, [(b"z", b"active")])

    compact(log)

    # Producer 5's last batch stays whole for its sequence, so g's tombstone must outlive it; so does its marker.
    assert contents(log) == [(0, b"g", b"committed offset"), (2, b"g", None), (5, b"z", b"active")]
    assert marker_offsets(log) == [1]


def test_idempotent_batches_are_cleaned_keeping_offsets_sequences_and_each_producers_last(
    tmp_path: Path, logs: OpenedLogs
) -> None:
    log = logs.open(tmp_path / "p-0", COMPACT)
    idempotent = dict(producer_id=7, producer_epoch=0)
    append(log, [(b"a", b"plain"), (b"b", b"plain")])
    append(log, [(b"a", b"idem-0"), (b"x", b"idem-0"), (b"y", b"idem-0")], base_sequence=0, **idempotent)
    retried = encode_batch([SimpleRecord(b"x", b"idem-3", (), NOW_MS)], base_offset=0, base_sequence=3, **idempotent)
    log.append(retried, now_ms=NOW_MS)
    append(log, [(b"y", b"plain-2"), (b"x", b"plain-2")])
    log.roll()
    append(log, [(b"z", b"active")])

    compact(log)

    assert contents(log) == [
        (1, b"b", b"plain"),
        (2, b"a", b"idem-0"),  # the idempotent batch lost x and y, and kept its offsets and sequence range
        (5, b"x", b"idem-3"),  # producer 7's last batch stays whole, though x has a later record
        (6, b"y", b"plain-2"),
        (7, b"x", b"plain-2"),
        (8, b"z", b"active"),
    ]
    rewritten = parse_header(log.read(2, 1 << 20, min_one_batch=True))
    assert (rewritten.base_offset, rewritten.last_offset, rewritten.records_count) == (2, 4, 1)
    assert (rewritten.producer_id, rewritten.base_sequence, rewritten.last_sequence) == (7, 0, 2)

    crash(log)
    for snapshot in log.directory.glob("*.snapshot"):
        snapshot.unlink()  # producer state comes back from the compacted batches alone
    again = logs.open(log.directory, COMPACT, recovery_point=0)
    assert again.producer_state.last_entry(7).last_seq == 3
    assert again.append(retried, now_ms=NOW_MS).duplicate  # a retry of the last batch is still known


def test_aborted_batches_go_and_markers_follow_once_their_data_is_gone(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "x-0", COMPACT)
    old = NOW_MS - 2 * DAY_MS
    txn = dict(producer_id=8, producer_epoch=0, transactional=True)
    append(log, [(b"c", b"aborted")], ts=old, base_sequence=0, **txn)  # 0
    abort = end_txn(log, 8, commit=False, ts=old)  # 1
    append(log, [(b"d", b"committed, then overwritten")], ts=old, base_sequence=1, **txn)  # 2
    commit_d = end_txn(log, 8, commit=True, ts=old)  # 3
    append(log, [(b"c", b"committed"), (b"e", b"committed")], ts=old, base_sequence=2, **txn)  # 4, 5
    commit_c = end_txn(log, 8, commit=True, ts=old)  # 6
    append(log, [(b"d", b"plain")], ts=old)  # 7
    append(log, [(b"f", b"last")], ts=old, base_sequence=4, **txn)  # 8: producer 8's last data batch
    commit_f = end_txn(log, 8, commit=True, ts=old)  # 9
    log.roll()
    append(log, [(b"z", b"active")])
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [(8, 0)]

    compact(log)  # the aborted and the obsolete batches go; their markers stay one pass longer
    assert contents(log) == [(4, b"c", b"committed"), (5, b"e", b"committed"), (7, b"d", b"plain"),
                             (8, b"f", b"last"), (10, b"z", b"active")]  # fmt: skip
    assert marker_offsets(log) == [abort, commit_d, commit_c, commit_f]

    compact(log)  # now nothing of those two transactions is left: their markers go
    assert marker_offsets(log) == [commit_c, commit_f]
    assert [r[0] for r in contents(log)] == [4, 5, 7, 8, 10]

    crash(log)
    for snapshot in log.directory.glob("*.snapshot"):
        snapshot.unlink()
    again = logs.open(log.directory, COMPACT, recovery_point=0)
    again.update_high_watermark(again.log_end_offset)
    assert again.last_stable_offset == again.log_end_offset  # no transaction looks open
    assert again.producer_state.last_entry(8).last_seq == 4


def test_markers_and_aborted_data_stay_until_delete_retention(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "r-0", COMPACT)
    txn = dict(producer_id=3, producer_epoch=0, transactional=True)
    append(log, [(b"a", b"aborted")], base_sequence=0, **txn)
    end_txn(log, 3, commit=False)
    append(log, [(b"a", b"committed")], base_sequence=1, **txn)
    end_txn(log, 3, commit=True)
    log.roll()
    append(log, [(b"z", b"active")])

    for _ in range(2):
        compact(log)  # the segment is new: markers stay however often it is cleaned
    assert contents(log) == [(2, b"a", b"committed"), (4, b"z", b"active")]
    assert marker_offsets(log) == [1, 3]


def test_a_range_stops_below_an_open_transaction(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "o-0", COMPACT)
    append(log, [(b"a", b"1")])
    append(log, [(b"a", b"2")])
    log.roll()
    append(log, [(b"a", b"open")], base_sequence=0, producer_id=4, producer_epoch=0, transactional=True)
    append(log, [(b"a", b"3")])
    log.roll()
    append(log, [(b"a", b"4")])
    log.roll()
    append(log, [(b"z", b"active")])

    compact(log)

    # Only the first segment lies wholly below the open transaction; the records after it are untouched.
    assert contents(log) == [(1, b"a", b"2"), (2, b"a", b"open"), (3, b"a", b"3"), (4, b"a", b"4"),
                             (5, b"z", b"active")]  # fmt: skip


def _prepare(logs: OpenedLogs, tmp_path: Path) -> tuple[PartitionLog, list, list]:
    log = logs.open(tmp_path / "k-0", COMPACT)
    written = write_random(log, 120, seed=11)
    log.flush()
    return log, written, expected_after(written, log.active_segment.base_offset)


def test_a_crash_before_the_swap_is_durable_keeps_the_old_segments(
    tmp_path: Path, monkeypatch, logs: OpenedLogs
) -> None:
    log, written, _ = _prepare(logs, tmp_path)

    def crash_at_rename(src, dst):
        raise OSError("killed before the rename")

    monkeypatch.setattr(cleaner.os, "rename", crash_at_rename)
    with pytest.raises(OSError, match="killed"):
        compact(log)
    monkeypatch.undo()
    assert any(name.endswith(".log.cleaned") for name in files(log))
    crash(log)

    again = logs.open(log.directory, COMPACT, recovery_point=0)
    assert contents(again) == written
    assert files(again) == segment_files(again)


@pytest.mark.parametrize("files_removed", [0, 1, 2, 5, 30])
def test_a_crash_after_the_swap_is_durable_completes_it_on_load(
    tmp_path: Path, monkeypatch, files_removed, logs: OpenedLogs
) -> None:
    """Killed inside ``complete_swap`` after it removed ``files_removed`` of the old segments' files."""
    log, written, want = _prepare(logs, tmp_path)
    unlink = Path.unlink
    removed = []

    def unlink_then_die(path: Path, missing_ok: bool = False) -> None:
        if len(removed) == files_removed:
            raise OSError("killed while completing the swap")
        removed.append(path)
        unlink(path, missing_ok=missing_ok)

    monkeypatch.setattr(Path, "unlink", unlink_then_die)
    with pytest.raises(OSError, match="killed"):
        compact(log)
    monkeypatch.undo()
    [swap] = [name for name in files(log) if name.endswith(".log.swap")]
    upper = int(swap.removesuffix(".log.swap").split("-")[1])
    crash(log)

    again = logs.open(log.directory, COMPACT, recovery_point=0)
    assert files(again) == segment_files(again)
    # The interrupted group and those before it are compacted; the pass never reached the later ones.
    assert contents(again) == [r for r in want if r[0] < upper] + [r for r in written if r[0] >= upper]


def test_a_segment_with_aborted_transactions_keeps_its_index(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "a-0", LogConfig(segment_bytes=400, cleanup_policy=("compact",)))
    for i in range(6):
        append(log, [(b"k", b"plain %d" % i)])
    txn = dict(producer_id=9, producer_epoch=0, transactional=True)
    append(log, [(b"t", b"aborted")], base_sequence=0, **txn)
    marker = encode_batch([SimpleRecord(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00", (), NOW_MS)],
                          producer_id=9, producer_epoch=0, transactional=True, control=True)  # fmt: skip
    log.append(marker, now_ms=NOW_MS, origin=AppendOrigin.COORDINATOR)
    for i in range(6):
        append(log, [(b"k", b"later %d" % i)])
    aborted_before = log.collect_aborted_transactions(0, log.log_end_offset)
    assert aborted_before

    compact(log)

    assert log.collect_aborted_transactions(0, log.log_end_offset) == aborted_before
    log.close()
    again = logs.open(log.directory, log.config, clean_shutdown=True)
    assert again.collect_aborted_transactions(0, again.log_end_offset) == aborted_before
    assert [v for _, k, v in contents(again) if k == b"t"] == [b"aborted"]


def test_a_range_that_keeps_nothing_leaves_an_empty_segment_and_reads_go_past_it(
    tmp_path: Path, logs: OpenedLogs
) -> None:
    log = logs.open(tmp_path / "e-0", COMPACT)
    old = NOW_MS - 2 * DAY_MS
    for i in range(10):
        append(log, [(b"a", b"%d" % i), (b"b", b"%d" % i)], ts=old)
    append(log, [(b"a", None), (b"b", None)], ts=old)  # both keys deleted long ago
    log.roll()
    append(log, [(b"c", b"active")])
    compact(log)
    assert contents(log) == [(22, b"c", b"active")]
    assert contents(log, 0) == contents(log, 22)
    assert [os.path.getsize(s.log_path) for s in log.segments[:-1]] == [0]
    log.close()
    again = logs.open(log.directory, COMPACT, recovery_point=0)
    assert contents(again, 0) == [(22, b"c", b"active")]


def test_emptied_segments_merge_into_the_next_kept_record(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "m-0", COMPACT)
    for i in range(40):
        append(log, [(b"same", b"%d" % i)])
    log.roll()
    append(log, [(b"same", b"last")])
    log.roll()
    append(log, [(b"other", b"active")])
    compact(log)
    assert contents(log, 0) == [(40, b"same", b"last"), (41, b"other", b"active")]
    assert len(log.segments) == 2


def test_a_compacted_log_refuses_records_without_a_key(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "n-0", COMPACT)
    append(log, [(b"k", b"1")])
    with pytest.raises(InvalidRecordError, match="without key"):
        append(log, [(b"k", b"2"), (None, b"no key")], compression=1)
    assert contents(log) == [(0, b"k", b"1")]  # nothing of the refused batch was written
    plain = logs.open(tmp_path / "d-0", LogConfig())
    append(plain, [(None, b"fine here")])


def test_records_without_a_key_go_once_a_log_is_switched_to_compaction(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "s-0", LogConfig(segment_bytes=1200))
    append(log, [(None, b"plain, no key"), (b"k", b"1")])
    append(log, [(None, b"idempotent, its producer's last")], producer_id=6, producer_epoch=0, base_sequence=0)
    log.roll()
    append(log, [(None, b"active")])
    log.update_config(COMPACT)

    compact(log)

    assert contents(log) == [(1, b"k", b"1"), (2, None, b"idempotent, its producer's last"), (3, None, b"active")]


def _job(log: PartitionLog) -> tuple[list, dict]:
    log.update_high_watermark(log.log_end_offset)
    found = cleaner.compaction_range(log.segments, log.last_stable_offset, 0)
    assert found is not None
    cleanable, end = found
    bases = [s.base_offset for s in cleanable]
    transactions = log.compaction_transactions(end)
    job = json.loads(cleaner_process.job_for(log.directory, bases, end, NOW_MS, log.config, transactions))
    return cleanable, {**job, "parent": os.getppid()}  # run here, as if this process were the broker's child


def test_the_compaction_process_reports_what_the_broker_installs(tmp_path: Path, logs: OpenedLogs) -> None:
    log, _, want = _prepare(logs, tmp_path)
    cleanable, job = _job(log)
    report = cleaner_process.run(job)
    groups = cleaner.open_cleaned(cleanable, [tuple(g) for g in report["groups"]], log.config)
    for group in groups:
        log.replace_segments(group)
    assert contents(log) == want
    assert files(log) == segment_files(log)


def test_the_compaction_process_refuses_a_directory_it_does_not_expect(tmp_path: Path, logs: OpenedLogs) -> None:
    log, written, _ = _prepare(logs, tmp_path)
    _, job = _job(log)
    with pytest.raises(RuntimeError, match="no segment files"):
        cleaner_process.run({**job, "bases": [*job["bases"], 10**6]})
    cleaner.swap_path(log.directory, 0, 1).write_bytes(b"")
    with pytest.raises(RuntimeError, match="interrupted compaction"):
        cleaner_process.run(job)
    assert not (log.directory / f"{10**6:020d}.log").exists()
    assert contents(log) == written


def test_a_group_installs_only_over_the_segments_it_was_made_from(tmp_path: Path, logs: OpenedLogs) -> None:
    log, _, want = _prepare(logs, tmp_path)
    log.update_high_watermark(log.log_end_offset)
    groups = cleaner.clean_range(*cleaner.compaction_range(log.segments, log.high_watermark, 0), log.config,
                                 now_ms=NOW_MS)  # fmt: skip
    log.replace_segments(groups[0])
    with pytest.raises(StorageError, match="changed meanwhile"):
        log.replace_segments(groups[0])  # its old segments are gone from the list now
    for group in groups[1:]:
        log.replace_segments(group)
    assert contents(log) == want


def test_the_compaction_process_stops_before_a_swap_once_its_broker_is_gone(tmp_path: Path, logs: OpenedLogs) -> None:
    log, written, _ = _prepare(logs, tmp_path)
    _, job = _job(log)
    before = {name: (log.directory / name).read_bytes() for name in files(log) if name.endswith(".log")}
    assert cleaner_process.run({**job, "parent": -1}) == {"groups": [], "error": None}
    assert {name: (log.directory / name).read_bytes() for name in files(log) if name.endswith(".log")} == before
    crash(log)
    again = logs.open(log.directory, COMPACT, recovery_point=0)
    assert contents(again) == written
    assert files(again) == segment_files(again)


def test_a_pass_that_fails_part_way_reports_the_groups_it_swapped_in(
    tmp_path: Path, monkeypatch, logs: OpenedLogs
) -> None:
    log = logs.open(tmp_path / "f-0", COMPACT)
    written = write_random(log, 200, seed=3, keys=200)  # many keys: what is kept still fills several groups
    want = expected_after(written, log.active_segment.base_offset)
    cleanable, job = _job(log)
    real_open, opened = os.open, []

    def third_cleaned_fails(path, flags, mode=0o777):
        if str(path).endswith(".log.cleaned"):
            opened.append(path)
            if len(opened) == 3:
                raise OSError(28, "No space left on device")
        return real_open(path, flags, mode)

    monkeypatch.setattr(cleaner.os, "open", third_cleaned_fails)
    report = cleaner_process.run(job)
    monkeypatch.undo()

    assert len(report["groups"]) == 2 and "No space left" in report["error"]
    for group in cleaner.open_cleaned(cleanable, [tuple(g) for g in report["groups"]], log.config):
        log.replace_segments(group)
    upper = report["groups"][-1][1]
    assert contents(log) == [r for r in want if r[0] < upper] + [r for r in written if r[0] >= upper]
    assert files(log) == segment_files(log)


@pytest.mark.parametrize("files_removed", [0, 1, 4])
def test_the_groups_of_a_pass_killed_part_way_are_found_and_installed(
    tmp_path: Path, monkeypatch, files_removed, logs: OpenedLogs
) -> None:
    """The compaction process dies inside its third swap, after removing ``files_removed`` old files: the broker,
    with no report, finishes that swap and installs all three groups over the segments it still has open."""
    log = logs.open(tmp_path / "d-0", COMPACT)
    written = write_random(log, 200, seed=3, keys=200)
    want = expected_after(written, log.active_segment.base_offset)
    log.update_high_watermark(log.log_end_offset)
    cleanable, end = cleaner.compaction_range(log.segments, log.high_watermark, 0)
    real_complete, swaps = cleaner.complete_swap, []

    def third_swap_dies(swap: Path, base: int, upper: int) -> None:
        swaps.append(upper)
        if len(swaps) < 3:
            return real_complete(swap, base, upper)
        old = sorted(p for p in swap.parent.iterdir() if p.suffix == ".log" and base <= int(p.stem) < upper)
        for path in old[:files_removed]:
            path.unlink()
        raise OSError("killed while completing the swap")

    monkeypatch.setattr(cleaner, "complete_swap", third_swap_dies)
    with pytest.raises(cleaner.CompactionInterrupted) as interrupted:
        cleaner.clean_range(cleanable, end, log.config, now_ms=NOW_MS)
    monkeypatch.undo()
    for group in interrupted.value.done:  # a killed process reports nothing: only the files tell
        group.new.close()

    finished = cleaner.finish_interrupted(cleanable, end)
    assert [upper for _, upper, _ in finished] == swaps
    for group in cleaner.open_cleaned(cleanable, finished, log.config):
        log.replace_segments(group)
    below = [r for r in want if r[0] < swaps[-1]] + [r for r in written if r[0] >= swaps[-1]]
    assert contents(log) == below
    assert files(log) == segment_files(log)
    crash(log)
    again = logs.open(log.directory, COMPACT, recovery_point=0)
    assert contents(again) == below


@pytest.mark.parametrize("seed", range(3))
def test_random_producers_and_transactions_keep_every_keys_latest_visible_record(
    tmp_path: Path, seed: int, logs: OpenedLogs
) -> None:
    """Plain, idempotent and transactional writers interleaved, passes in between: after every pass, and after a
    reload without producer snapshots, every key's latest visible record is there at its offset, no aborted record
    is (but in its producer's last batch), every transactional record still has its marker, and producer state
    comes back whole."""
    rng = random.Random(seed)
    log = logs.open(tmp_path / "m-0", LogConfig(segment_bytes=600, cleanup_policy=("compact",)))
    old = NOW_MS - 2 * DAY_MS
    written: dict[int, tuple[bytes, bytes]] = {}
    txn_of: dict[int, tuple[int, int]] = {}  # offset -> (producer id, its transaction's first offset)
    batch_of: dict[int, tuple[int, int]] = {}  # offset -> (producer id, its batch's last offset)
    outcome: dict[tuple[int, int], tuple[bool, int]] = {}  # transaction -> (committed, marker offset)
    sequence = dict.fromkeys((10, 11, 12, 20, 21), 0)
    open_txn: dict[int, int] = {}

    def write(producer_id: int | None) -> None:
        count = rng.randint(1, 3)
        records = [(f"k{rng.randrange(15)}".encode(), f"v{rng.random():.5f}".encode()) for _ in range(count)]
        fields = {}
        if producer_id is not None:
            fields = dict(producer_id=producer_id, producer_epoch=0, base_sequence=sequence[producer_id],
                          transactional=producer_id < 20)  # fmt: skip
            sequence[producer_id] += len(records)
        first = append(log, records, ts=old, **fields)
        for i, record in enumerate(records):
            written[first + i] = record
            if producer_id is not None:
                batch_of[first + i] = (producer_id, first + len(records) - 1)
                if producer_id < 20:
                    txn_of[first + i] = (producer_id, open_txn.setdefault(producer_id, first))

    def end(producer_id: int) -> None:
        commit = rng.random() < 0.6
        outcome[(producer_id, open_txn.pop(producer_id))] = (commit, end_txn(log, producer_id, commit=commit, ts=old))

    def check(log: PartitionLog, settled: bool) -> None:
        """``settled``: no transaction is open and every segment but the active one was in the last pass."""
        present = {offset: (key, value) for offset, key, value in contents(log)}
        assert all(written[offset] == record for offset, record in present.items())
        markers = set(marker_offsets(log))
        last_batch = {pid: last for pid, last in batch_of.values()}  # each producer's latest batch's last offset

        def visible(offset: int) -> bool:
            txn = txn_of.get(offset)
            return txn is None or outcome.get(txn, (True,))[0]

        latest = {}
        for offset, (key, _) in sorted(written.items()):
            if visible(offset) and (offset not in txn_of or txn_of[offset] in outcome):
                latest[key] = offset
        assert all(offset in present for offset in latest.values())
        for offset in present:
            if offset in txn_of and txn_of[offset] in outcome:
                committed, marker = outcome[txn_of[offset]]
                assert marker in markers
                producer_id, batch_last = batch_of[offset]
                assert committed or batch_last == last_batch[producer_id] or not settled

    for step in range(400):
        choice = rng.random()
        if choice < 0.3:
            write(None)
        elif choice < 0.5:
            write(rng.choice((20, 21)))
        else:
            producer_id = rng.choice((10, 11, 12))
            if producer_id in open_txn and rng.random() < 0.35:
                end(producer_id)
            else:
                write(producer_id)
        if rng.random() < 0.05:
            log.roll()
        if step % 50 == 49:
            compact(log)
            check(log, settled=False)
    for producer_id in list(open_txn):
        end(producer_id)
    log.roll()
    written[append(log, [(b"z", b"active")])] = (b"z", b"active")
    for _ in range(2):
        compact(log)
        check(log, settled=True)
    states = {pid: (e.epoch, e.last_seq) for pid, e in log.producer_state.producers.items()}

    crash(log)
    for snapshot in log.directory.glob("*.snapshot"):
        snapshot.unlink()
    again = logs.open(log.directory, log.config, recovery_point=0)
    again.update_high_watermark(again.log_end_offset)
    check(again, settled=True)
    assert again.last_stable_offset == again.log_end_offset
    assert {pid: (e.epoch, e.last_seq) for pid, e in again.producer_state.producers.items()} == states


def _aborted_in_every_segment(logs: OpenedLogs, tmp_path: Path) -> PartitionLog:
    """Three segments, each with an aborted transaction of producer 1; producer 2's last transaction, in the
    third, is aborted too (its batch stays whole: it is the producer's last)."""
    log = logs.open(tmp_path / "i-0", COMPACT)
    old = NOW_MS - 2 * DAY_MS
    for i in range(3):
        append(log, [(b"a", b"aborted %d" % i)], ts=old, producer_id=1, producer_epoch=0, base_sequence=2 * i,
               transactional=True)  # fmt: skip
        end_txn(log, 1, commit=False, ts=old)
        append(log, [(b"a", b"kept %d" % i)], ts=old, producer_id=1, producer_epoch=0, base_sequence=2 * i + 1,
               transactional=True)  # fmt: skip
        end_txn(log, 1, commit=True, ts=old)
        if i == 2:
            append(log, [(b"b", b"aborted, last")], ts=old, producer_id=2, producer_epoch=0, base_sequence=0,
                   transactional=True)  # fmt: skip
            end_txn(log, 2, commit=False, ts=old)
        log.roll()
    append(log, [(b"z", b"active")])
    return log


def test_segments_with_aborted_transactions_merge_keeping_the_entries_still_needed(
    tmp_path: Path, logs: OpenedLogs
) -> None:
    log = _aborted_in_every_segment(logs, tmp_path)
    assert [len(s.txn_index.entries) for s in log.segments] == [1, 1, 2, 0]

    compact(log)  # the aborted batches go; their markers (and index entries) stay one pass longer
    assert [len(s.txn_index.entries) for s in log.segments] == [4, 0]
    compact(log)

    assert len(log.segments) == 2
    assert [(t.producer_id, t.first_offset) for t in log.segments[0].txn_index.entries] == [(2, 12)]
    assert log.collect_aborted_transactions(0, log.log_end_offset) == [(2, 12)]
    assert contents(log) == [(10, b"a", b"kept 2"), (12, b"b", b"aborted, last"), (14, b"z", b"active")]
    log.close()
    again = logs.open(log.directory, COMPACT, clean_shutdown=True)
    assert again.collect_aborted_transactions(0, again.log_end_offset) == [(2, 12)]


@pytest.mark.parametrize("dies_at", ["replace", "rename"])
def test_a_crash_inside_a_swap_with_a_merged_txn_index_completes_both_on_load(
    tmp_path: Path, monkeypatch, dies_at: str, logs: OpenedLogs
) -> None:
    """Killed before the merged ``.txnindex`` or the swap file is moved into place: loading finishes the rest."""
    log = _aborted_in_every_segment(logs, tmp_path)
    real = getattr(cleaner.os, dies_at)

    def dies(src, dst) -> None:
        if str(src).endswith((".txnindex.cleaned", ".log.swap")[dies_at == "rename"]):
            raise OSError("killed while completing the swap")
        real(src, dst)

    monkeypatch.setattr(cleaner.os, dies_at, dies)
    with pytest.raises(OSError, match="killed"):
        compact(log)
    monkeypatch.undo()
    log.close()

    again = logs.open(log.directory, COMPACT, clean_shutdown=True)  # indexes read, not rebuilt
    assert files(again) == segment_files(again)
    assert [len(s.txn_index.entries) for s in again.segments] == [4, 0]
    assert again.collect_aborted_transactions(0, again.log_end_offset) == [(1, 0), (1, 4), (1, 8), (2, 12)]
    assert contents(again) == [(10, b"a", b"kept 2"), (12, b"b", b"aborted, last"), (14, b"z", b"active")]
