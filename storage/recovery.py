"""Loading a partition directory's segments, with crash recovery (Kafka's LogLoader).

Guarantees of ``load_segments``:
- A compaction interrupted after its swap file was made durable is completed (``storage.cleaner``); other
  leftover temporary files (``*.tmp``, ``*.cleaned``, ``*.swap``, ``*.deleted``) and index files without a
  ``.log`` are removed.
- Clean shutdown: segment files are trusted; each segment's index files are sanity-checked and rebuilt when
  missing or corrupt.
- Otherwise: segments wholly below the recovery point are trusted the same way; from the segment holding the
  recovery point on, every batch is validated (length, magic, CRC, offsets increasing and within the
  segment's relative-offset range). The first invalid byte ends the log: the segment is truncated there, every
  later segment is deleted, and the indexes of the scanned segments are rebuilt through
  ``LogSegment.index_batch`` (so they are byte-identical to the ones appends build).
- Scanned segments, and trusted ones whose ``.txnindex`` is missing or corrupt, come back with
  ``txn_index_stale`` set: ``PartitionLog`` rebuilds those from producer state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from oncelog.protocol.records.batch import BATCH_HEADER_SIZE, InvalidBatchError, parse_header, validate_batch
from oncelog.storage.cleaner import complete_swaps
from oncelog.storage.config import LogConfig
from oncelog.storage.segment import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    MAX_RELATIVE_OFFSET,
    MIN_BATCH_LENGTH,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    LogSegment,
    is_segment_log_name,
)

RECOVERY_READ_CHUNK = 1 << 20
STRAY_SUFFIXES = (".tmp", ".cleaned", ".swap", ".deleted")


@dataclass
class LoadResult:
    """Segments in offset order plus what loading had to do."""

    segments: list[LogSegment] = field(default_factory=list)
    recovered_segments: int = 0  # segments scanned batch by batch with CRC checks
    truncated_bytes: int = 0  # bytes cut from the scanned segments
    deleted_segments: int = 0  # segments dropped because an earlier one was truncated
    rebuilt_indexes: int = 0  # trusted segments whose index files had to be rebuilt


def _remove_strays(directory: Path) -> set[int]:
    """Delete temporary files and orphan indexes; return the base offsets of the ``.log`` files."""
    bases: set[int] = set()
    for path in directory.iterdir():
        name = path.name
        if name.endswith(STRAY_SUFFIXES):
            path.unlink(missing_ok=True)
        elif is_segment_log_name(name):
            bases.add(int(name[: -len(LOG_SUFFIX)]))
    for path in directory.iterdir():
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            stem = path.name[: -len(suffix)]
            if path.name.endswith(suffix) and stem.isdigit() and int(stem) not in bases:
                path.unlink(missing_ok=True)
    return bases


def recover_segment(segment: LogSegment, expected_offset: int) -> int:
    """Validate every batch, truncate at the first invalid byte and rebuild the indexes.

    ``expected_offset`` is the smallest acceptable base offset of the first batch (the previous segment's
    next offset). Returns the number of bytes removed.
    """
    segment.begin_rebuild()
    size = segment.size
    pos = 0
    buf = b""
    buf_start = 0
    expected = max(expected_offset, segment.base_offset)
    while size - pos >= BATCH_HEADER_SIZE:
        off = pos - buf_start
        if len(buf) - off < BATCH_HEADER_SIZE:
            buf, buf_start, off = segment.pread(min(RECOVERY_READ_CHUNK, size - pos), pos), pos, 0
        header = parse_header(buf, off)
        if header.batch_length < MIN_BATCH_LENGTH or header.size > size - pos:
            break
        if len(buf) - off < header.size:
            buf, buf_start, off = (
                segment.pread(min(max(RECOVERY_READ_CHUNK, header.size), size - pos), pos),
                pos,
                0,
            )
        try:
            header = validate_batch(buf, off)
        except InvalidBatchError:
            break
        if header.base_offset < expected or header.last_offset - segment.base_offset > MAX_RELATIVE_OFFSET:
            break
        segment.index_batch(header, pos)
        expected = header.next_offset
        pos += header.size
    truncated = size - pos
    if truncated:
        os.ftruncate(segment.fd, pos)
        segment.size = pos
    segment.finish_rebuild()
    segment.txn_index_stale = True
    return truncated


def load_segments(directory: Path, config: LogConfig, *, recovery_point: int, clean_shutdown: bool) -> LoadResult:
    """Open every segment in ``directory``, recovering as described in the module docstring."""
    result = LoadResult()
    complete_swaps(directory)
    bases = sorted(_remove_strays(directory))
    segments = [LogSegment(directory, base, config) for base in bases]
    expected = 0
    for i, segment in enumerate(segments):
        next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
        trusted = clean_shutdown or (next_base is not None and next_base <= recovery_point)
        if trusted:
            result.rebuilt_indexes += segment.load()
            result.segments.append(segment)
            expected = segment.next_offset
            continue
        result.recovered_segments += 1
        truncated = recover_segment(segment, expected)
        result.segments.append(segment)
        expected = segment.next_offset
        if truncated:
            result.truncated_bytes += truncated
            for later in segments[i + 1 :]:
                later.delete()
                result.deleted_segments += 1
            break
    return result
