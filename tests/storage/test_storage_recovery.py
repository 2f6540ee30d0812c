"""Crash recovery: torn tails, garbage, zero-filled tails, corrupt batches, missing/corrupt indexes."""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest
from oncelog.protocol.records.batch import iter_headers
from oncelog.storage.config import LogConfig
from oncelog.storage.log import PartitionLog
from support.killed_log import crash, write_index_entries
from support.opened_logs import OpenedLogs

from storage.batches import make_batch

CONFIG = LogConfig(segment_bytes=3000, index_interval_bytes=250)
BATCHES = 70


def fill(log: PartitionLog, n: int) -> None:
    for i in range(n):
        log.append(make_batch(1 + i % 4, timestamp=10_000 + (i * 7919) % 500, value_size=5 + i % 13), now_ms=0)


def index_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.suffix in (".index", ".timeindex")}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A crashed log of BATCHES batches, plus a reference log of BATCHES - 1 batches built by appends."""
    root = tmp_path_factory.mktemp("pristine")
    log = PartitionLog.open(root / "t-0", CONFIG)
    fill(log, BATCHES)
    assert len(log.segments) >= 3
    write_index_entries(log)  # the index files are complete, so tests can expect them back after recovery
    crash(log)
    ref = PartitionLog.open(root / "ref-0", CONFIG)
    fill(ref, BATCHES - 1)
    write_index_entries(ref)
    crash(ref)
    return root


def copy_of(pristine: Path, tmp_path: Path) -> Path:
    target = tmp_path / "t-0"
    shutil.copytree(pristine / "t-0", target)
    return target


def last_log_file(directory: Path) -> Path:
    return sorted(directory.glob("*.log"))[-1]


def assert_all_readable(log: PartitionLog, n: int) -> None:
    data = log.read(0, 10**9)
    headers = [h for _, h in iter_headers(data, check_crc=True)]
    assert len(headers) == n
    assert len(data) == sum(h.size for h in headers)
    assert [h.base_offset for h in headers[1:]] == [h.next_offset for h in headers[:-1]]


def test_torn_tail_at_every_byte_of_last_batch(pristine: Path, tmp_path: Path, logs: OpenedLogs) -> None:
    reference_indexes = index_files(pristine / "ref-0")
    ref = logs.open(pristine / "ref-0", CONFIG, clean_shutdown=True)
    expected_end = ref.log_end_offset
    crash(ref)
    last = last_log_file(pristine / "t-0")
    full = last.stat().st_size
    last_batch_size = full - (pristine / "ref-0" / last.name).stat().st_size
    assert last_batch_size > 61
    for cut in range(1, last_batch_size):
        work = tmp_path / f"cut{cut}"
        directory = copy_of(pristine, work)
        os.truncate(last_log_file(directory), full - cut)
        log = logs.open(directory, CONFIG)
        assert log.log_end_offset == expected_end, cut
        assert last_log_file(directory).stat().st_size == full - last_batch_size
        assert index_files(directory) == reference_indexes, cut
        assert_all_readable(log, BATCHES - 1)
        crash(log)
        shutil.rmtree(work)


@pytest.mark.parametrize("tail", ["garbage", "zeros", "short-header"])
def test_junk_after_last_batch_is_cut(pristine: Path, tmp_path: Path, tail: str, logs: OpenedLogs) -> None:
    directory = copy_of(pristine, tmp_path)
    expected = index_files(directory)
    last = last_log_file(directory)
    size = last.stat().st_size
    junk = {"garbage": random.Random(7).randbytes(5000), "zeros": bytes(4096), "short-header": b"\x00" * 30}[tail]
    with open(last, "ab") as f:
        f.write(junk)
    log = logs.open(directory, CONFIG)
    assert last.stat().st_size == size
    assert index_files(directory) == expected
    assert_all_readable(log, BATCHES)
    assert log.append(make_batch(1), now_ms=0).first_offset == log.log_end_offset - 1


def test_segment_shorter_than_a_header(pristine: Path, tmp_path: Path, logs: OpenedLogs) -> None:
    directory = copy_of(pristine, tmp_path)
    last = last_log_file(directory)
    os.truncate(last, 30)
    log = logs.open(directory, CONFIG)
    assert last.stat().st_size == 0
    assert log.log_end_offset == int(last.stem)
    assert log.read(log.log_end_offset, 100) == b""


def test_corrupt_batch_in_earlier_segment_drops_later_segments(
    pristine: Path, tmp_path: Path, logs: OpenedLogs
) -> None:
    directory = copy_of(pristine, tmp_path)
    log_files = sorted(directory.glob("*.log"))
    victim = log_files[1]
    raw = bytearray(victim.read_bytes())
    headers = list(iter_headers(raw))
    pos, header = headers[3]
    raw[pos + 70] ^= 0x55  # inside the records: CRC mismatch
    victim.write_bytes(bytes(raw))
    log = logs.open(directory, CONFIG, recovery_point=int(victim.stem))
    assert log.recovered_segments == 1  # the damaged segment; later ones are deleted, not scanned
    assert log.log_end_offset == header.base_offset
    assert sorted(directory.glob("*.log")) == log_files[:2]
    assert victim.stat().st_size == pos
    assert_all_readable(log, sum(1 for _ in iter_headers(log_files[0].read_bytes())) + 3)


def test_recovery_starts_at_the_recovery_point(pristine: Path, tmp_path: Path, logs: OpenedLogs) -> None:
    directory = copy_of(pristine, tmp_path)
    bases = [int(p.stem) for p in sorted(directory.glob("*.log"))]
    log = logs.open(directory, CONFIG, recovery_point=bases[-1] + 1)
    assert log.recovered_segments == 1
    crash(log)
    log = logs.open(directory, CONFIG, recovery_point=0)
    assert log.recovered_segments == len(bases)


def test_clean_close_and_reopen_skips_recovery(tmp_path: Path, logs: OpenedLogs) -> None:
    log = logs.open(tmp_path / "t-0", CONFIG)
    fill(log, BATCHES)
    end = log.log_end_offset
    log.close()
    before = index_files(tmp_path / "t-0")
    assert log.recovery_point == end
    log = logs.open(tmp_path / "t-0", CONFIG, recovery_point=end, clean_shutdown=True)
    assert log.recovered_segments == 0
    assert log.log_end_offset == end
    assert index_files(tmp_path / "t-0") == before
    assert_all_readable(log, BATCHES)
    # appends after a clean reopen keep indexing exactly like one uninterrupted run
    fill_more = [make_batch(2, timestamp=20_000 + i) for i in range(30)]
    for batch in fill_more:
        log.append(batch, now_ms=0)
    write_index_entries(log)
    crash(log)
    ref = logs.open(tmp_path / "ref-0", CONFIG)
    fill(ref, BATCHES)
    for batch in fill_more:
        ref.append(batch, now_ms=0)
    write_index_entries(ref)
    crash(ref)
    assert index_files(tmp_path / "t-0") == index_files(tmp_path / "ref-0")


def test_index_entries_lost_with_the_process_are_rebuilt(pristine: Path, tmp_path: Path, logs: OpenedLogs) -> None:
    """A killed broker's index files lack the entries still in memory; recovery writes them all back."""
    expected = index_files(pristine / "t-0")
    log = logs.open(tmp_path / "t-0", CONFIG)
    fill(log, BATCHES)
    crash(log)  # without write_index_entries: what a SIGKILL leaves
    lagging = index_files(tmp_path / "t-0")
    assert lagging.keys() == expected.keys()
    assert lagging != expected and all(expected[name].startswith(data) for name, data in lagging.items())
    bases = [int(p.stem) for p in sorted((tmp_path / "t-0").glob("*.log"))]
    log = logs.open(tmp_path / "t-0", CONFIG, recovery_point=bases[-1])
    assert log.recovered_segments == 1  # only the active segment: rolled ones were written whole at their roll
    assert index_files(tmp_path / "t-0") == expected
    assert_all_readable(log, BATCHES)
    crash(log)


@pytest.mark.parametrize("damage", ["missing-index", "missing-timeindex", "odd-size", "garbage", "truncated"])
def test_damaged_index_rebuilt_on_clean_open(pristine: Path, tmp_path: Path, damage: str, logs: OpenedLogs) -> None:
    directory = copy_of(pristine, tmp_path)
    expected = index_files(directory)
    seg = sorted(directory.glob("*.log"))[1].stem
    index, timeindex = directory / f"{seg}.index", directory / f"{seg}.timeindex"
    if damage == "missing-index":
        index.unlink()
    elif damage == "missing-timeindex":
        timeindex.unlink()
    elif damage == "odd-size":
        with open(index, "ab") as f:
            f.write(b"\x01\x02\x03")
    elif damage == "garbage":
        index.write_bytes(random.Random(3).randbytes(len(expected[index.name])))
    else:
        os.truncate(index, len(expected[index.name]) - 8)
    log = logs.open(directory, CONFIG, clean_shutdown=True)
    assert log.recovered_segments == 0
    assert index_files(directory) == expected
    assert_all_readable(log, BATCHES)
    for offset in range(0, log.log_end_offset, 7):
        [(_, h)] = list(iter_headers(log.read(offset, 1)))
        assert h.base_offset <= offset <= h.last_offset


def test_stray_files_are_removed(pristine: Path, tmp_path: Path, logs: OpenedLogs) -> None:
    directory = copy_of(pristine, tmp_path)
    (directory / "00000000000000099999.index").write_bytes(b"")
    (directory / "00000000000000000000.log.cleaned").write_bytes(b"x")
    (directory / "00000000000000000000.snapshot.tmp").write_bytes(b"x")
    logs.open(directory, CONFIG)
    names = {p.name for p in directory.iterdir()}
    assert "00000000000000099999.index" not in names
    assert not any(n.endswith((".cleaned", ".tmp")) for n in names)
