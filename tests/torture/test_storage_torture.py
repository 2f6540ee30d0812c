"""Storage torture: random transactional workloads, a crash, then damage of everything a crash (or a bad disk) can
touch: torn and garbage tails, deleted/corrupt ``.index``, ``.timeindex``, ``.txnindex`` and producer snapshots.

After reopening, every case checks:

- the log was cut back to the last whole valid batch, and nothing below ``durable_offset`` at crash time (what
  fsync-before-ack acknowledged) is lost;
- the surviving bytes are exactly the bytes appended;
- every index file equals the one a fresh log gets from appending the surviving batches, and so do the producer
  state, the last stable offset and the aborted-transaction ranges;
- the log accepts appends afterwards.

CI runs ``CASES`` random cases (seeded, so a failure names its seed). Long form::

    ONCELOG_STORAGE_TORTURE_CASES=2000 .venv/bin/pytest tests/torture/test_storage_torture.py -q
    ONCELOG_STORAGE_TORTURE_SEED=1234 ...   # replay one seed (runs cases SEED..SEED+CASES-1)
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from oncelog.protocol.records import ControlType, SimpleRecord, encode_batch, encode_control_batch, iter_headers
from oncelog.storage.append_origin import AppendOrigin
from oncelog.storage.config import LogConfig
from oncelog.storage.log import PartitionLog
from support.killed_log import crash, write_index_entries

CASES = int(os.environ.get("ONCELOG_STORAGE_TORTURE_CASES", "200"))
FIRST_SEED = int(os.environ.get("ONCELOG_STORAGE_TORTURE_SEED", "0"))
INDEX_SUFFIXES = (".index", ".timeindex", ".txnindex")
PLAIN, IDEMPOTENT, TXN_DATA, MARKER, FLUSH_DATA, FLUSH = range(6)


@dataclass
class Op:
    kind: int
    records: bytes = b""
    origin: AppendOrigin = AppendOrigin.CLIENT


def _records(rng: random.Random, count: int, ts: int) -> list[SimpleRecord]:
    return [
        SimpleRecord(b"k%d" % rng.randrange(100), rng.randbytes(rng.randrange(1, 60)), [], ts + i) for i in range(count)
    ]


def workload(rng: random.Random, steps: int) -> list[Op]:
    """A random sequence of appends (plain, idempotent, transactional data and markers) and flushes."""
    ops: list[Op] = []
    sequences: dict[int, int] = {}
    open_txns: set[int] = set()
    ts = 1_000_000
    for _ in range(steps):
        ts += rng.randrange(0, 50)
        roll = rng.random()
        count = rng.randrange(1, 6)
        if roll < 0.2:
            ops.append(Op(PLAIN, encode_batch(_records(rng, count, ts))))
        elif roll < 0.4:
            pid = rng.choice((1, 2, 3))
            seq = sequences.get(pid, 0)
            sequences[pid] = seq + count
            ops.append(
                Op(
                    IDEMPOTENT,
                    encode_batch(_records(rng, count, ts), producer_id=pid, producer_epoch=0, base_sequence=seq),
                )
            )
        elif roll < 0.7:
            pid = rng.choice((10, 11, 12))
            seq = sequences.get(pid, 0)
            sequences[pid] = seq + count
            open_txns.add(pid)
            ops.append(
                Op(
                    TXN_DATA,
                    encode_batch(
                        _records(rng, count, ts),
                        producer_id=pid,
                        producer_epoch=0,
                        base_sequence=seq,
                        transactional=True,
                    ),
                )
            )
        elif roll < 0.85 and open_txns:
            pid = rng.choice(sorted(open_txns))
            open_txns.discard(pid)
            kind = rng.choice((ControlType.COMMIT, ControlType.ABORT))
            marker = encode_control_batch(kind, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp_ms=ts)
            ops.append(Op(MARKER, marker, AppendOrigin.COORDINATOR))
        elif roll < 0.93:
            ops.append(Op(FLUSH_DATA))
        else:
            ops.append(Op(FLUSH))
    return ops


def run(directory: Path, config: LogConfig, ops: list[Op], *, appends: int | None = None) -> tuple[PartitionLog, int]:
    """Apply ``ops`` (stopping after ``appends`` appends) and return the log and the last flush()'s recovery point."""
    log = PartitionLog.open(directory, config)
    checkpoint = 0
    done = 0
    for op in ops:
        if op.kind == FLUSH_DATA:
            log.flush_data()
        elif op.kind == FLUSH:
            log.flush()
            checkpoint = log.recovery_point
        else:
            if appends is not None and done == appends:
                break
            log.append(op.records, now_ms=0, origin=op.origin)
            done += 1
    return log, checkpoint


ENTRY_SIZES = {".index": 8, ".timeindex": 12, ".txnindex": 34}


def _damage_file(rng: random.Random, path: Path, *, trusted: bool) -> str:
    """Delete, cut, overwrite or extend ``path``. In a trusted segment (below the recovery point: fsynced, so a
    crash cannot touch it) only damage a sanity check can see: an index cut at an entry boundary there looks like
    a shorter valid index, in Kafka too."""
    size = path.stat().st_size
    entry = ENTRY_SIZES.get(path.suffix, 1)
    kinds = (
        ("delete", "truncate", "garbage", "append") if trusted else ("delete", "truncate", "garbage", "append", "empty")
    )
    how = rng.choice(kinds)
    if how == "delete":
        path.unlink()
    elif how == "truncate" and size:
        cut = rng.randrange(size)
        if trusted and cut % entry == 0:
            cut += 1
        os.truncate(path, cut)
    elif how == "garbage" and size:
        path.write_bytes(rng.randbytes(size))
    elif how == "append":
        extra = rng.randrange(1, 40)
        if trusted and extra % entry == 0:
            extra += 1
        with open(path, "ab") as f:
            f.write(rng.randbytes(extra))
    else:
        os.truncate(path, 0)
    return f"{how} {path.name}"


def damage(
    rng: random.Random,
    directory: Path,
    last: Path,
    batches: list[tuple[int, int, int]],
    durable: int,
    trusted_below: int,
    *,
    crashed: bool,
) -> tuple[list[str], int | None]:
    """Damage the files; returns what was done and the position the last segment was cut at (None: not cut).

    Only bytes at or above the durable offset are torn or followed by garbage (a crash cannot lose more);
    index files and snapshots are damaged anywhere (they are rebuilt from the log).
    """
    done: list[str] = []
    cut: int | None = None
    size = last.stat().st_size
    durable_pos = max((end for _pos, end, last_offset in batches if last_offset < durable), default=0)
    if crashed and size > durable_pos and rng.random() < 0.7:
        cut = rng.randrange(durable_pos, size)
        os.truncate(last, cut)
        done.append(f"cut {last.name} at {cut} (durable up to {durable_pos})")
    if crashed and rng.random() < 0.3:
        junk = rng.choice((rng.randbytes(rng.randrange(1, 300)), bytes(rng.randrange(1, 300))))
        with open(last, "ab") as f:
            f.write(junk)
        done.append(f"{len(junk)} junk bytes")
    files = [p for p in directory.iterdir() if p.suffix in (*INDEX_SUFFIXES, ".snapshot")]
    for path in rng.sample(files, min(len(files), rng.randrange(0, 4))):
        trusted = path.suffix != ".snapshot" and int(path.stem) < trusted_below
        done.append(_damage_file(rng, path, trusted=trusted))
    return done, cut


def index_files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in directory.iterdir() if p.suffix in INDEX_SUFFIXES}


def assert_same_state(log: PartitionLog, fresh: PartitionLog, directory: Path, fresh_dir: Path) -> None:
    assert log.log_end_offset == fresh.log_end_offset
    assert log.read(0, 1 << 30) == fresh.read(0, 1 << 30)
    write_index_entries(log)
    write_index_entries(fresh)
    got, want = index_files(directory), index_files(fresh_dir)
    for name, data in want.items():
        assert got.get(name) == data, name
    for name in got.keys() - want.keys():  # a segment rolled for a batch that did not survive
        assert got[name] == b"", name
        assert (directory / name).with_suffix(".log").stat().st_size == 0
    assert sorted(log.producer_state.producers.items()) == sorted(fresh.producer_state.producers.items())
    assert log.producer_state.ongoing == fresh.producer_state.ongoing
    assert log.last_stable_offset == fresh.last_stable_offset
    end = log.log_end_offset
    assert log.collect_aborted_transactions(0, end) == fresh.collect_aborted_transactions(0, end)


def torture_case(seed: int, root: Path) -> None:
    rng = random.Random(seed)
    config = LogConfig(segment_bytes=rng.randrange(1200, 6000), index_interval_bytes=rng.randrange(60, 700))
    ops = workload(rng, rng.randrange(20, 90))
    directory = root / "t-0"
    log, checkpoint = run(directory, config, ops)
    written = log.read(0, 1 << 30)
    headers = [h for _, h in iter_headers(written)]
    durable = log.durable_offset
    last = log.segments[-1]
    last_base = last.base_offset
    last_batches = [(pos, pos + h.size, h.last_offset) for pos, h in last.iter_headers(0)]
    last_bytes = last.log_path.read_bytes()
    crashed = rng.random() < 0.8
    if crashed:
        crash(log)
    else:
        log.close()
        checkpoint = log.log_end_offset
    # Segments wholly below the checkpointed recovery point are trusted on open (all of them after a clean stop).
    bases = [segment.base_offset for segment in log.segments]
    trusted_below = max([b for b, nxt in itertools.pairwise(bases) if nxt <= checkpoint], default=-1) + 1
    if not crashed:
        trusted_below = 1 << 62
    what, cut = damage(rng, directory, last.log_path, last_batches, durable, trusted_below, crashed=crashed)
    context = f"seed {seed}: {what}"

    reopened = PartitionLog.open(directory, config, recovery_point=checkpoint, clean_shutdown=not crashed)
    survivors = len(headers)
    if cut is not None:
        # Batches of the last segment survive while their bytes are intact (junk may rebuild a batch cut at its
        # last byte: a record's trailing header count is a zero byte).
        damaged = last.log_path.read_bytes() if last.log_path.exists() else b""
        survivors = sum(1 for h in headers if h.base_offset < last_base)
        survivors += sum(
            1 for _ in itertools.takewhile(lambda b: damaged[b[0] : b[1]] == last_bytes[b[0] : b[1]], last_batches)
        )
    expected_end = headers[survivors - 1].next_offset if survivors else 0
    assert reopened.log_end_offset == expected_end, context
    assert reopened.log_end_offset >= durable, context  # nothing acknowledged under fsync-before-ack is lost

    fresh_dir = root / "fresh-0"
    fresh, _ = run(fresh_dir, config, ops, appends=survivors)
    fresh.update_high_watermark(fresh.log_end_offset)
    try:
        assert_same_state(reopened, fresh, directory, fresh_dir)
    except AssertionError as exc:
        raise AssertionError(f"{context}: {exc}") from exc
    # The recovered log keeps working: the next appends get the next offsets.
    result = reopened.append(encode_batch(_records(rng, 2, 2_000_000)), now_ms=0)
    assert result.first_offset == expected_end, context
    crash(reopened)
    crash(fresh)


def test_random_crashes_and_damage(tmp_path: Path) -> None:
    for seed in range(FIRST_SEED, FIRST_SEED + CASES):
        root = tmp_path / str(seed)
        torture_case(seed, root)
        shutil.rmtree(root)


@pytest.mark.parametrize("last", ["marker", "txn-data", "idempotent"])
def test_torn_last_batch_at_every_byte(tmp_path: Path, last: str) -> None:
    """The last batch (an ABORT marker, transactional data, or idempotent data) torn at every byte offset."""
    rng = random.Random(5)
    ops = [
        Op(
            TXN_DATA,
            encode_batch(_records(rng, 3, 10), producer_id=7, producer_epoch=0, base_sequence=0, transactional=True),
        ),
        Op(IDEMPOTENT, encode_batch(_records(rng, 2, 11), producer_id=1, producer_epoch=0, base_sequence=0)),
        Op(FLUSH_DATA),
    ]
    final = {
        "marker": Op(
            MARKER,
            encode_control_batch(
                ControlType.ABORT, producer_id=7, producer_epoch=0, coordinator_epoch=0, timestamp_ms=12
            ),
            AppendOrigin.COORDINATOR,
        ),
        "txn-data": Op(
            TXN_DATA,
            encode_batch(_records(rng, 4, 12), producer_id=7, producer_epoch=0, base_sequence=3, transactional=True),
        ),
        "idempotent": Op(
            IDEMPOTENT, encode_batch(_records(rng, 4, 12), producer_id=1, producer_epoch=0, base_sequence=2)
        ),
    }[last]
    config = LogConfig(segment_bytes=1 << 20, index_interval_bytes=100)
    pristine = tmp_path / "pristine" / "t-0"
    log, _ = run(pristine, config, [*ops, final])
    durable = log.durable_offset
    crash(log)
    fresh_dir = tmp_path / "fresh" / "fresh-0"
    fresh, _ = run(fresh_dir, config, ops)
    fresh.update_high_watermark(fresh.log_end_offset)
    segment = sorted(pristine.glob("*.log"))[-1]
    full = segment.stat().st_size
    for cut in range(full - len(final.records), full):
        directory = tmp_path / f"cut{cut}" / "t-0"
        shutil.copytree(pristine, directory)
        os.truncate(directory / segment.name, cut)
        reopened = PartitionLog.open(directory, config)
        assert reopened.log_end_offset == durable, cut
        assert_same_state(reopened, fresh, directory, fresh_dir)
        crash(reopened)
        shutil.rmtree(directory.parent)
