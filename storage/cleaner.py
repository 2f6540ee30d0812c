"""Log compaction of one partition (Kafka's LogCleaner), for logs whose cleanup.policy holds "compact".

A pass covers the log's closed segments wholly below the last stable offset (the cleanable range, in which every
transaction is decided) and keeps, of every key, only its record with the highest offset there; a tombstone (null
value) that is its key's latest goes too once its segment's newest timestamp is more than delete.retention.ms old.
Aborted transactions' batches go, and transaction markers once nothing of their transaction is left
(``storage.compaction_plan`` decides each batch, before any is rewritten). Offsets never change: kept records keep
theirs, so readers see gaps. A rewritten batch keeps its base and last offsets, producer id, epoch, base sequence,
compression, timestamp type and leader epoch.

Adjacent segments are merged into one, named after the first, while what they keep adds up to at most segment.bytes.
The merged segment's ``.txnindex`` holds the group's aborted-transaction entries, but those whose ABORT marker the
pass drops (their transaction's batches are already gone).

Crash safety (``clean_group``): the cleaned data goes to ``<base>.log.cleaned`` (and, when the group's entries are
not just the first segment's, ``<base>.txnindex.cleaned``), is fsynced, then renamed to ``<base>-<upper>.log.swap``
and the directory fsynced. From then on the swap is completed, by the pass or by the next load
(``complete_swaps``): the files of the segments based in [base, upper) go, except the first one's ``.txnindex``,
which the merged one replaces if there is one, and the swap becomes ``<base>.log``, whose indexes are rebuilt when
it is opened. A crash before the rename leaves the old segments and stray ``.cleaned`` files that loading removes.
Nothing here touches the in-memory segment list: ``PartitionLog.replace_segments`` installs the result.
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from oncelog.protocol.records.batch import BatchHeader
from oncelog.protocol.records.codec import decode_batch, rewrite_batch
from oncelog.storage.checkpoint import fsync_dir
from oncelog.storage.compaction_plan import NO_TRANSACTIONS, CompactionPlan, LogTransactions, plan_pass
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
from oncelog.storage.txn_index import encode_entries

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


def cleanable_segments(segments: Sequence[LogSegment], stable_offset: int) -> list[LogSegment]:
    """The closed segments whose every offset is below ``stable_offset`` (the log's last stable offset), oldest
    first."""
    return [s for s, after in itertools.pairwise(segments) if after.base_offset <= stable_offset]


def group_segments(segments: Sequence[LogSegment], sizes: dict[int, int], segment_bytes: int) -> list[list[LogSegment]]:
    """Split adjacent segments into groups to merge: at most ``segment_bytes`` together by ``sizes`` (bytes each
    keeps, by base offset) and offsets within one segment's relative range."""
    groups: list[list[LogSegment]] = []
    size = 0
    for segment in segments:
        current = groups[-1] if groups else None
        kept = sizes[segment.base_offset]
        if (
            current is None
            or size + kept > segment_bytes
            or segment.next_offset - 1 - current[0].base_offset > MAX_RELATIVE_OFFSET
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


def _cleaned(segment: LogSegment, plan: CompactionPlan, drop_tombstones: bool) -> Iterator[tuple[bytes, int]]:
    """The segment's batches as they are kept, each with how many records it lost."""
    for header, data in iter_batches(segment):
        base = header.base_offset
        if base in plan.dropped:
            yield b"", header.records_count
            continue
        if base in plan.whole or header.is_control:
            yield data, 0
            continue
        records = decode_batch(data)[1]
        kept = [r for r in records if plan.keeps(r, drop_tombstones)]
        if len(kept) == len(records):
            yield data, 0
        elif kept:
            rewritten = rewrite_batch(header, kept)
            yield rewritten, len(records) - len(kept)
        else:
            yield b"", len(records)


def _kept_bytes(segment: LogSegment, plan: CompactionPlan, drop_tombstones: bool) -> int:
    """About how many bytes of the segment a pass keeps (a rewritten batch counts its share of records)."""
    kept_bytes = 0
    for header, data in iter_batches(segment):
        base = header.base_offset
        if base in plan.dropped:
            continue
        if base in plan.whole or header.is_control:
            kept_bytes += header.size
            continue
        records = decode_batch(data)[1]
        kept = sum(1 for r in records if plan.keeps(r, drop_tombstones))
        kept_bytes += header.size if kept == len(records) else header.size * kept // len(records)
    return kept_bytes


def compaction_range(
    segments: Sequence[LogSegment], stable_offset: int, first_dirty: int
) -> tuple[list[LogSegment], int] | None:
    """What a pass over ``segments`` (a snapshot of the log's list) would cover: the cleanable segments and the
    base offset that follows them; None unless a closed segment joined that range since ``first_dirty`` (the end
    of the previous pass)."""
    cleanable = cleanable_segments(segments, stable_offset)
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
    transactions: LogTransactions = NO_TRANSACTIONS,
    still_wanted: Callable[[], bool] = lambda: True,
) -> list[CleanedGroup]:
    """One compaction pass over adjacent closed segments, the last ending before ``end``: rewrites the groups that
    merge segments or lose records and returns them, opened. It only reads the old segments and writes files.
    ``still_wanted`` is asked before each group's swap: once it says no, the pass stops and leaves only a stray
    ``.cleaned`` file. Raises OSError, CompactionInterrupted when it fails after rewriting some groups, and
    StorageError when a segment's timestamp cannot be read."""
    drop_tombstones = {s.base_offset: now_ms - s.largest_timestamp() > config.delete_retention_ms for s in cleanable}
    plan = plan_pass(((drop_tombstones[s.base_offset], iter_batches(s)) for s in cleanable), transactions)
    bases = [s.base_offset for s in cleanable] + [end]
    next_base = dict(itertools.pairwise(bases))
    sizes = {s.base_offset: _kept_bytes(s, plan, drop_tombstones[s.base_offset]) for s in cleanable}
    groups = []
    for group in group_segments(cleanable, sizes, config.segment_bytes):
        first = group[0]
        if len(group) == 1 and sizes[first.base_offset] == first.size:
            continue  # loses nothing, merges with nothing
        upper = next_base[group[-1].base_offset]
        try:
            cleaned = clean_group(
                group, upper, plan, config=config, drop_tombstones=drop_tombstones, still_wanted=still_wanted
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
    plan: CompactionPlan,
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
            for data, lost in _cleaned(segment, plan, drop_tombstones[segment.base_offset]):
                removed += lost
                write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    _write_merged_txn_index(group, plan)
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


def merged_txn_index_path(directory: Path, base: int) -> Path:
    """Where a group's merged ``.txnindex`` waits for its swap (``complete_swap`` moves it into place)."""
    return directory / (file_name(base, TXN_INDEX_SUFFIX) + ".cleaned")


def _write_merged_txn_index(group: list[LogSegment], plan: CompactionPlan) -> None:
    """Write (and fsync) the group's aborted-transaction entries, but those whose marker this pass drops (their
    batches are gone), unless they are just the first segment's."""
    entries = [e for s in group for e in s.txn_index.entries if e.last_offset not in plan.dropped]
    if entries == group[0].txn_index.entries:
        return
    path = merged_txn_index_path(group[0].directory, group[0].base_offset)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        write_all(fd, encode_entries(entries))
        os.fsync(fd)
    finally:
        os.close(fd)


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
    merged = merged_txn_index_path(directory, base)
    if merged.exists():
        os.replace(merged, directory / file_name(base, TXN_INDEX_SUFFIX))
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
    for stray in directory.glob("*.cleaned"):
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
