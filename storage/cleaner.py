"""Log compaction of one partition (Kafka's LogCleaner), for logs whose cleanup.policy holds "compact".

A pass covers the log's closed segments wholly below the high watermark (the cleanable range) and keeps, of every
key, only its record with the highest offset there; a tombstone (null value) that is its key's latest goes too
once its segment's newest timestamp is more than delete.retention.ms old. Offsets never change: kept records keep
theirs, so readers see gaps. A rewritten batch keeps its base offset, compression, timestamp type and leader epoch.

Kept whole, so that what is rebuilt from the log stays what it was:
- batches with a producer id (idempotent or transactional data, markers): producer state and transactions are
  rebuilt from them. A non-transactional one still makes earlier records of its keys obsolete; a transactional
  one does not (it may be aborted). A tombstone of a key such a batch holds stays, or that record would come back;
- records without a key (a compacted topic should hold none).

Adjacent segments are merged into one, named after the first, while what they keep adds up to at most segment.bytes;
a segment with aborted-transaction index entries only ever starts a group (its ``.txnindex`` stays its own).

Crash safety (``clean_group``): the cleaned data goes to ``<base>.log.cleaned``, is fsynced, then renamed to
``<base>-<upper>.log.swap`` and the directory fsynced. From then on the swap is completed, by the pass or by the
next load (``complete_swaps``): the files of the segments based in [base, upper) go, except the first one's
``.txnindex`` (still right: its batches with producer ids were kept), and the swap becomes ``<base>.log``, whose
indexes are rebuilt when it is opened. A crash before the rename leaves the old segments and a stray
``.cleaned`` that loading removes. Nothing here touches the in-memory segment list: ``PartitionLog.replace_segments``
installs the result.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from oncelog.protocol.records.batch import BatchHeader
from oncelog.protocol.records.codec import Record, decode_batch, encode_batch
from oncelog.storage.checkpoint import fsync_dir
from oncelog.storage.config import LogConfig
from oncelog.storage.faults import fault_point
from oncelog.storage.index_file import write_all
from oncelog.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    file_name,
)

CLEANED_SUFFIX = ".log.cleaned"
_SWAP_NAME = re.compile(r"^(\d{20})-(\d{20})\.log\.swap$")


@dataclass(frozen=True)
class CleanedGroup:
    """Adjacent segments ``old`` (the last one ending before ``upper``) rewritten as ``new`` on disk."""

    old: list[LogSegment]
    new: LogSegment
    upper: int
    records_removed: int


class CompactionInterrupted(Exception):
    """A pass failed (``cause``) after rewriting the groups ``done``, whose files are already swapped in."""

    def __init__(self, done: list[CleanedGroup], cause: OSError) -> None:
        super().__init__(f"{type(cause).__name__}: {cause}")
        self.done = done
        self.cause = cause


def swap_path(directory: Path, base: int, upper: int) -> Path:
    return directory / f"{base:020d}-{upper:020d}.log.swap"


def cleanable_segments(segments: Sequence[LogSegment], high_watermark: int) -> list[LogSegment]:
    """The closed segments whose every offset is below ``high_watermark``, oldest first."""
    return [s for s, after in itertools.pairwise(segments) if after.base_offset <= high_watermark]


def group_segments(
    segments: Sequence[LogSegment], sizes: dict[int, int], segment_bytes: int
) -> list[list[LogSegment]]:
    """Split adjacent segments into groups to merge: at most ``segment_bytes`` together by ``sizes`` (bytes each
    keeps, by base offset), offsets within one segment's relative range, and a segment with aborted-transaction
    entries only at a group's start."""
    groups: list[list[LogSegment]] = []
    size = 0
    for segment in segments:
        current = groups[-1] if groups else None
        kept = sizes[segment.base_offset]
        if (
            current is None
            or size + kept > segment_bytes
            or segment.next_offset - 1 - current[0].base_offset > MAX_RELATIVE_OFFSET
            or segment.txn_index.entries
        ):
            groups.append([segment])
            size = kept
        else:
            current.append(segment)
            size += kept
    return groups


def iter_batches(segment: LogSegment) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every whole batch of the segment with its bytes."""
    for pos, header in segment.iter_headers(0):
        yield header, segment.pread(header.size, pos)


@dataclass(frozen=True)
class KeyIndex:
    """What a pass knows of the cleanable range's keys."""

    #: Each key's highest offset among the records that make earlier ones of their key obsolete.
    latest: dict[bytes, int]
    #: Keys with a record in a batch kept whole: their tombstones stay, or that record would outlive them.
    pinned: frozenset[bytes]

    def keeps(self, record: Record, drop_tombstones: bool) -> bool:
        key = record.key
        if key is None:
            return True
        if self.latest.get(key) != record.offset:
            return False
        return record.value is not None or not drop_tombstones or key in self.pinned


def index_keys(segments: Sequence[LogSegment]) -> KeyIndex:
    latest: dict[bytes, int] = {}
    pinned: set[bytes] = set()
    for segment in segments:
        for header, data in iter_batches(segment):
            if header.is_control:
                continue
            for record in decode_batch(data)[1]:
                if record.key is None:
                    continue
                if header.has_producer_id:
                    pinned.add(record.key)
                if not header.is_transactional:
                    latest[record.key] = record.offset
    return KeyIndex(latest, frozenset(pinned))


def _cleaned(segment: LogSegment, keys: KeyIndex, drop_tombstones: bool) -> Iterator[tuple[bytes, int]]:
    """The segment's batches as they are kept, each with how many records it lost."""
    for header, data in iter_batches(segment):
        if header.has_producer_id:
            yield data, 0
            continue
        records = decode_batch(data)[1]
        kept = [r for r in records if keys.keeps(r, drop_tombstones)]
        if len(kept) == len(records):
            yield data, 0
        elif kept:
            rewritten = encode_batch(
                kept,
                base_offset=header.base_offset,
                compression=header.compression,
                timestamp_type=header.timestamp_type,
                partition_leader_epoch=header.partition_leader_epoch,
            )
            yield rewritten, len(records) - len(kept)
        else:
            yield b"", len(records)


def _kept_bytes(segment: LogSegment, keys: KeyIndex, drop_tombstones: bool) -> int:
    """About how many bytes of the segment a pass keeps (a rewritten batch counts its share of records)."""
    kept_bytes = 0
    for header, data in iter_batches(segment):
        if header.has_producer_id:
            kept_bytes += header.size
            continue
        records = decode_batch(data)[1]
        kept = sum(1 for r in records if keys.keeps(r, drop_tombstones))
        kept_bytes += header.size if kept == len(records) else header.size * kept // len(records)
    return kept_bytes


def compaction_range(
    segments: Sequence[LogSegment], high_watermark: int, first_dirty: int
) -> tuple[list[LogSegment], int] | None:
    """What a pass over ``segments`` (a snapshot of the log's list) would cover: the cleanable segments and the
    base offset that follows them; None unless a closed segment joined that range since ``first_dirty`` (the end
    of the previous pass)."""
    cleanable = cleanable_segments(segments, high_watermark)
    if not cleanable:
        return None
    end = segments[len(cleanable)].base_offset
    return (cleanable, end) if end > first_dirty else None


def clean_range(
    cleanable: Sequence[LogSegment],
    end: int,
    config: LogConfig,
    *,
    now_ms: int,
    still_wanted: Callable[[], bool] = lambda: True,
) -> list[CleanedGroup]:
    """One compaction pass over adjacent closed segments, the last ending before ``end``: rewrites the groups that
    merge segments or lose records and returns them, opened. It only reads the old segments and writes files.
    ``still_wanted`` is asked before each group's swap: once it says no, the pass stops and leaves only a stray
    ``.cleaned`` file. Raises OSError, CompactionInterrupted when it fails after rewriting some groups, and
    StorageError when a segment's timestamp cannot be read."""
    keys = index_keys(cleanable)
    drop_tombstones = {
        s.base_offset: now_ms - s.largest_timestamp() > config.delete_retention_ms for s in cleanable
    }
    bases = [s.base_offset for s in cleanable] + [end]
    next_base = dict(itertools.pairwise(bases))
    sizes = {s.base_offset: _kept_bytes(s, keys, drop_tombstones[s.base_offset]) for s in cleanable}
    groups = []
    for group in group_segments(cleanable, sizes, config.segment_bytes):
        first = group[0]
        if len(group) == 1 and sizes[first.base_offset] == first.size:
            continue  # loses nothing, merges with nothing
        upper = next_base[group[-1].base_offset]
        try:
            cleaned = clean_group(
                group, upper, keys, config=config, drop_tombstones=drop_tombstones, still_wanted=still_wanted
            )
        except OSError as exc:
            if not groups:
                raise
            raise CompactionInterrupted(groups, exc) from exc
        if cleaned is None:
            break
        groups.append(cleaned)
    return groups


def clean_group(
    group: list[LogSegment],
    upper: int,
    keys: KeyIndex,
    *,
    config: LogConfig,
    drop_tombstones: dict[int, bool],
    still_wanted: Callable[[], bool] = lambda: True,
) -> CleanedGroup | None:
    """Rewrite ``group`` (adjacent segments, the last ending before ``upper``) as one segment on disk and open it.
    ``drop_tombstones`` says per segment base offset whether its latest tombstones go. None, with the old segments'
    files untouched, when ``still_wanted`` says no just before the swap. Raises OSError; the old segments' objects
    stay usable for reads either way."""
    directory = group[0].directory
    base = group[0].base_offset
    cleaned = directory / file_name(base, CLEANED_SUFFIX)
    removed = 0
    fd = os.open(cleaned, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for segment in group:
            for data, lost in _cleaned(segment, keys, drop_tombstones[segment.base_offset]):
                removed += lost
                write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    if not still_wanted():
        return None
    swap = swap_path(directory, base, upper)
    os.rename(cleaned, swap)
    fsync_dir(directory)
    fault_point("cleaner.after_swap_rename")
    complete_swap(swap, base, upper)
    new = LogSegment(directory, base, config)
    new.load()  # its index files are gone: rebuilt here; its .txnindex is the first segment's
    return CleanedGroup(group, new, upper, removed)


def open_cleaned(
    cleanable: Sequence[LogSegment], reported: Sequence[tuple[int, int, int]], config: LogConfig
) -> list[CleanedGroup]:
    """The groups another process rewrote from ``cleanable``, each reported as (base, upper, records removed), with
    their new segments opened here."""
    groups = []
    for base, upper, removed in reported:
        old = [s for s in cleanable if base <= s.base_offset < upper]
        new = LogSegment(old[0].directory, base, config)
        new.load()
        groups.append(CleanedGroup(old, new, upper, removed))
    return groups


def pending_swaps(directory: Path) -> list[tuple[Path, int, int]]:
    """Swap files of compactions interrupted after they were made durable, each with the [base, upper) it replaces
    (``complete_swaps`` finishes them)."""
    found = []
    for path in sorted(directory.iterdir()):
        match = _SWAP_NAME.match(path.name)
        if match is not None:
            found.append((path, int(match.group(1)), int(match.group(2))))
    return found


def complete_swap(swap: Path, base: int, upper: int) -> None:
    """Replace the segments based in [base, upper) with the swap file (see the module docstring)."""
    directory = swap.parent
    for path in directory.iterdir():
        stem, dot, suffix = path.name.partition(".")
        if not stem.isdigit() or not dot or not base <= int(stem) < upper:
            continue
        suffix = "." + suffix
        keep = int(stem) == base and suffix == TXN_INDEX_SUFFIX
        if suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX) and not keep:
            path.unlink(missing_ok=True)
    os.rename(swap, directory / file_name(base, LOG_SUFFIX))
    fsync_dir(directory)


def finish_interrupted(cleanable: Sequence[LogSegment], end: int) -> list[tuple[int, int, int]]:
    """After a pass over ``cleanable`` (ending at ``end``) died part-way, its process killed say: complete its
    durable swap and drop its stray ``.cleaned`` file, as loading would, then find every group it swapped in.
    Returns them as ``open_cleaned`` takes them (records removed unknown: 0), for the caller to install, so that
    the segment list agrees with the files again.

    A group shows on disk as a segment whose ``.log`` is no longer the file it has open, followed by the
    segments whose ``.log`` is gone."""
    directory = cleanable[0].directory
    complete_swaps(directory)
    for stray in directory.glob("*" + CLEANED_SUFFIX):
        stray.unlink(missing_ok=True)
    finished: list[tuple[int, int, int]] = []
    group_base: int | None = None
    for segment in cleanable:
        try:
            replaced = os.stat(segment.log_path).st_ino != os.fstat(segment.fd).st_ino
        except FileNotFoundError:
            continue  # merged into the group before it
        if group_base is not None:
            finished.append((group_base, segment.base_offset, 0))
        group_base = segment.base_offset if replaced else None
    if group_base is not None:
        finished.append((group_base, end, 0))
    return finished


def complete_swaps(directory: Path) -> int:
    """Finish the compactions a crash interrupted after their swap file was durable; returns how many."""
    swaps = pending_swaps(directory)
    for path, base, upper in swaps:
        complete_swap(path, base, upper)
    return len(swaps)
