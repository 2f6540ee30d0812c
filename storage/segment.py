"""One log segment: ``<base>.log`` plus its ``.index``, ``.timeindex`` and ``.txnindex`` (Kafka's LogSegment).

Guarantees:
- A segment keeps one descriptor open per file (``SEGMENT_SUFFIXES``) from construction to ``close``, every segment
  of a log, not only the active one: ``OPEN_FILES_PER_SEGMENT``, which the broker's descriptor budget counts. A
  construction that fails (EMFILE) closes what it opened.
- ``append`` writes the given bytes with one ``write`` and indexes each batch with ``index_batch``;
  recovery and index rebuilds call the same ``index_batch`` over the same batches, so rebuilt index files
  are byte-identical to the ones built while appending.
- Indexing rule (per batch, in order): track the largest batch max-timestamp and the last offset of the first
  batch reaching it; when more than ``index_interval_bytes`` were appended since the last entry, add an offset
  entry ``(batch last offset -> batch position)`` and a time entry ``(max timestamp so far, its offset)``.
- Only batch headers are read; nothing here looks at individual records.
- The ``.txnindex`` (aborted transactions) depends on producer state, so the segment cannot rebuild it alone:
  ``load`` and recovery set ``txn_index_stale`` when it is missing, corrupt or may not match the log, and the
  owning ``PartitionLog`` rebuilds it by replaying producer state. ``append`` writes the entries it is given
  after the batches and undoes both on failure.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from oncelog.protocol.records.batch import BATCH_HEADER_SIZE, LOG_OVERHEAD, BatchHeader, InvalidBatchError, parse_header
from oncelog.protocol.records.codec import Record, decode_batch
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import StorageError
from oncelog.storage.faults import fault_point
from oncelog.storage.index_file import IndexCorruptError, write_all_vectored
from oncelog.storage.offset_index import OffsetIndex
from oncelog.storage.time_index import TimeIndex
from oncelog.storage.txn_index import AbortedTxn, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"  # aborted transactions (see txn_index)
#: The files of a segment; each is open while the segment is.
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)
#: Descriptors one open LogSegment holds (the broker's file-descriptor budget counts these).
OPEN_FILES_PER_SEGMENT = len(SEGMENT_SUFFIXES)
NO_TIMESTAMP = -1  # RecordBatch.NO_TIMESTAMP
MIN_BATCH_LENGTH = BATCH_HEADER_SIZE - LOG_OVERHEAD
MAX_RELATIVE_OFFSET = 0x7FFFFFFF  # index entries store offsets as int32 relative to the base
HEADER_READ_CHUNK = 8192


def is_segment_log_name(name: str) -> bool:
    """``name`` is a segment's ``.log`` file (20 digits and the suffix), not a temporary or other file."""
    return name.endswith(LOG_SUFFIX) and name[: -len(LOG_SUFFIX)].isdigit()


def file_name(base_offset: int, suffix: str) -> str:
    """Kafka's 20-digit zero-padded file name for a segment (or snapshot) starting at ``base_offset``."""
    return f"{base_offset:020d}{suffix}"


class LogSegment:
    """A segment's files and the in-memory state needed to append to it and read from it."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig) -> None:
        """Open (creating when missing) the segment files. Call ``load`` or ``rebuild_indexes`` next."""
        self.directory = directory
        self.base_offset = base_offset
        self.config = config
        self.log_path = directory / file_name(base_offset, LOG_SUFFIX)
        self.index_files_existed = all(
            (directory / file_name(base_offset, suffix)).exists() for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX)
        )
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        opened: list[OffsetIndex | TimeIndex | TransactionIndex] = []
        try:
            self.offset_index = OffsetIndex(
                directory / file_name(base_offset, INDEX_SUFFIX), base_offset, config.max_index_size
            )
            opened.append(self.offset_index)
            self.time_index = TimeIndex(
                directory / file_name(base_offset, TIME_INDEX_SUFFIX), base_offset, config.max_index_size
            )
            opened.append(self.time_index)
            self.txn_index = TransactionIndex(directory / file_name(base_offset, TXN_INDEX_SUFFIX), base_offset)
            self.size = os.fstat(self.fd).st_size
        except BaseException:
            # Out of descriptors (EMFILE) or a failing disk: leak nothing.
            for index in opened:
                index.close()
            os.close(self.fd)
            raise
        self.txn_index_stale = False  # set when the .txnindex must be rebuilt from producer state
        self._reset_state()
        self.deleted = False

    def _reset_state(self) -> None:
        self.next_offset = self.base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = self.base_offset
        self.bytes_since_last_index_entry = 0
        self.first_batch_timestamp: int | None = None

    # ----------------------------------------------------------------------------------------- indexing
    def index_batch(self, header: BatchHeader, position: int) -> None:
        """Account for one batch at ``position`` (the single indexing rule; see the module docstring)."""
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = header.max_timestamp
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        if self.bytes_since_last_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
        self.bytes_since_last_index_entry += header.size
        self.next_offset = header.next_offset

    def begin_rebuild(self) -> None:
        """Forget indexes and state before replaying batches through ``index_batch``."""
        self._reset_state()
        self.offset_index.data = bytearray()
        self.time_index.data = bytearray()

    def finish_rebuild(self) -> None:
        """Write the indexes built since ``begin_rebuild`` over the index files."""
        self.offset_index.replace(self.offset_index.data)
        self.time_index.replace(self.time_index.data)

    def rebuild_indexes(self) -> None:
        """Rebuild both index files from the batch headers in the log (no CRC checks)."""
        self.begin_rebuild()
        for pos, header in self.iter_headers(0):
            self.index_batch(header, pos)
        self.finish_rebuild()

    def load(self) -> bool:
        """Load trusted files (clean shutdown, or below the recovery point).

        Sanity-checks the index files and rebuilds them when corrupt or missing; returns True if it rebuilt.
        The in-memory state (next offset, max timestamp, bytes since the last entry) is recomputed from the
        last index entry and the batches after it.
        """
        try:
            if not self.index_files_existed and self.size > 0:
                raise IndexCorruptError(f"{self.log_path}: index files are missing")
            self.offset_index.load()
            self.time_index.load()
            self.offset_index.sanity_check(self.size)
            self._reset_state()
            first = self.read_header(0)
            if first is not None:
                self.first_batch_timestamp = first.max_timestamp
            time_last = self.time_index.last_entry()
            if time_last is not None:
                self.max_timestamp, self.offset_of_max_timestamp = time_last
            last = self.offset_index.last_entry()
            tail_start = last[1] if last else 0
            tail_end = tail_start
            # Replay the indexing rule over the tail: no batch after the last entry may have been due one.
            since = 0
            for pos, header in self.iter_headers(tail_start):
                if pos == tail_start and last is not None:
                    if header.last_offset != last[0]:
                        raise IndexCorruptError(f"{self.offset_index.path}: last entry does not match its batch")
                elif since > self.config.index_interval_bytes:
                    raise IndexCorruptError(f"{self.offset_index.path}: entries are missing")
                since += header.size
                if header.max_timestamp > self.max_timestamp:
                    self.max_timestamp = header.max_timestamp
                    self.offset_of_max_timestamp = header.last_offset
                self.next_offset = header.next_offset
                tail_end = pos + header.size
            if tail_end != self.size:
                raise IndexCorruptError(f"{self.log_path}: the log does not end on a batch boundary")
            entries, time_entries = self.offset_index.entries, self.time_index.entries
            if time_entries > entries or (entries > 0 and time_entries == 0):
                raise IndexCorruptError(f"{self.time_index.path}: entry count does not match the offset index")
            self.time_index.sanity_check(self.next_offset)
            self.bytes_since_last_index_entry = since
            rebuilt = False
        except IndexCorruptError:
            self.rebuild_indexes()
            rebuilt = True
        self._load_txn_index()
        return rebuilt

    def _load_txn_index(self) -> None:
        """Load the .txnindex; mark it stale when missing next to a non-empty log, or corrupt."""
        try:
            if not self.txn_index.existed and self.size > 0:
                raise IndexCorruptError(f"{self.txn_index.path} is missing")
            self.txn_index.load(self.next_offset)
        except IndexCorruptError:
            self.txn_index.entries = []
            self.txn_index_stale = True

    # ----------------------------------------------------------------------------------------- writing
    def append(
        self,
        pieces: Sequence[bytes | bytearray | memoryview],
        headers: list[tuple[int, BatchHeader]],
        aborted: list[AbortedTxn] | None = None,
    ) -> None:
        """Append whole batches, given as ``pieces`` whose concatenation they are (``headers`` holds each batch's
        position within it), with one vectored write, then the ``aborted`` transaction index entries their markers
        produce.

        On OSError the log and index files and the in-memory state are put back as they were, then the error
        propagates.
        """
        start = self.size
        saved = (
            self.next_offset,
            self.max_timestamp,
            self.offset_of_max_timestamp,
            self.bytes_since_last_index_entry,
            self.first_batch_timestamp,
        )
        index_lengths = (len(self.offset_index.data), len(self.time_index.data))
        txn_entries = len(self.txn_index.entries)
        try:
            fault_point("storage.append")
            write_all_vectored(self.fd, pieces)
            self.size = start + sum(len(piece) for piece in pieces)
            for pos, header in headers:
                self.index_batch(header, start + pos)
            self.offset_index.write_if_due()
            self.time_index.write_if_due()
            if aborted:
                self.txn_index.append(aborted)
        except OSError:
            self.size = start
            (
                self.next_offset,
                self.max_timestamp,
                self.offset_of_max_timestamp,
                self.bytes_since_last_index_entry,
                self.first_batch_timestamp,
            ) = saved
            with contextlib.suppress(OSError):
                os.ftruncate(self.fd, start)
            for index, length in zip((self.offset_index, self.time_index), index_lengths, strict=True):
                index.discard_after(length)
            self.txn_index.discard_after(txn_entries)
            raise

    def truncate_to_position(self, position: int) -> None:
        """Cut the log at ``position`` (a batch boundary) and rebuild the indexes to match; aborted transactions
        whose marker was cut are dropped from the .txnindex."""
        os.ftruncate(self.fd, position)
        self.size = position
        self.rebuild_indexes()
        self.txn_index.truncate_to(self.next_offset)

    def write_index_entries(self) -> None:
        """Write the offset and time index entries the files do not hold yet (see ``index_file``)."""
        self.offset_index.write_pending()
        self.time_index.write_pending()

    def fsync(self) -> None:
        os.fsync(self.fd)
        self.offset_index.fsync()
        self.time_index.fsync()
        self.txn_index.fsync()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()

    def delete(self) -> None:
        """Close and unlink every file of the segment."""
        self.close()
        self.deleted = True
        for suffix in SEGMENT_SUFFIXES:
            (self.directory / file_name(self.base_offset, suffix)).unlink(missing_ok=True)

    # ----------------------------------------------------------------------------------------- reading
    @property
    def is_empty(self) -> bool:
        return self.size == 0

    def largest_timestamp(self) -> int:
        """The largest batch timestamp, or the file's modification time when no batch carries one."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        try:
            return int(os.stat(self.log_path).st_mtime * 1000)
        except OSError as exc:
            raise StorageError(str(exc)) from exc

    def read_header(self, position: int) -> BatchHeader | None:
        """The header at ``position``, or None when fewer than a header's bytes remain."""
        if self.size - position < BATCH_HEADER_SIZE:
            return None
        return parse_header(os.pread(self.fd, BATCH_HEADER_SIZE, position))

    def iter_headers(self, start: int, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """Yield ``(position, header)`` of whole batches from ``start``; stops at a torn/implausible one."""
        end = self.size if end is None else end
        pos = start
        buf = b""
        buf_start = start
        while end - pos >= BATCH_HEADER_SIZE:
            off = pos - buf_start
            if len(buf) - off < BATCH_HEADER_SIZE:
                buf = os.pread(self.fd, min(HEADER_READ_CHUNK, end - pos), pos)
                buf_start, off = pos, 0
                if len(buf) < BATCH_HEADER_SIZE:
                    return
            header = parse_header(buf, off)
            if header.batch_length < MIN_BATCH_LENGTH or pos + header.size > end:
                return
            yield pos, header
            pos += header.size

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= ``offset``, or None."""
        for pos, header in self.iter_headers(self.offset_index.lookup(offset)):
            if header.last_offset >= offset:
                return pos, header
        return None

    def find_timestamp(self, timestamp: int, starting_offset: int = 0) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or above ``starting_offset`` whose timestamp is >= ``timestamp``
        (Kafka's LogSegment.findOffsetByTimestamp and FileRecords.searchForTimestamp: the batches are skipped by
        their max timestamp, the first batch that reaches it is decoded); None if there is none. A LogAppendTime
        batch's records carry its max timestamp. A batch that no longer decodes answers its base offset."""
        if self.max_timestamp < timestamp:
            return None
        floor = self.time_index.lookup(timestamp)
        start = self.offset_index.lookup(max(floor or 0, starting_offset))
        for pos, header in self.iter_headers(start):
            if header.max_timestamp < timestamp or header.last_offset < starting_offset:
                continue
            found = self.first_record(pos, header, lambda r: r.timestamp >= timestamp and r.offset >= starting_offset)
            if found is not None:
                return found
        return None

    def first_record(
        self, position: int, header: BatchHeader, matches: Callable[[Record], bool]
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record of the batch at ``position`` that ``matches``, or None. A batch
        that no longer decodes answers its base offset and max timestamp (what its header still tells)."""
        try:
            _header, records = decode_batch(self.pread(header.size, position))
        except InvalidBatchError:
            return header.base_offset, header.max_timestamp
        return next(((r.offset, r.timestamp) for r in records if matches(r)), None)

    def collect_aborted_txns(self, start_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        """See ``TransactionIndex.collect``."""
        return self.txn_index.collect(start_offset, upper_bound_offset)

    def pread(self, length: int, position: int) -> bytes:
        return os.pread(self.fd, length, position)
