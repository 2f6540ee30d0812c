"""Idempotent/transactional producer state per partition (Kafka's ProducerStateManager + ProducerAppendInfo).

Rules (Kafka 3.9, client-origin appends, without KIP-890 transaction verification):
- A batch is a *duplicate* when the producer's committed entry has the same epoch and one of its last 5
  batches has the same first and last sequence; the caller appends nothing and answers with that batch's
  original offsets. Duplicates are looked up against the state before the request only, and the first
  duplicate found answers the whole request (UnifiedLog.analyzeAndValidateProducerState).
- Epoch lower than the current one -> InvalidProducerEpochError (data batches and control markers).
- Sequence checks (CLIENT origin only; COORDINATOR appends are checked for epochs only):
  - epoch different from the current one (a bump): the base sequence must be 0, unless the producer has no
    epoch yet -> OutOfOrderSequenceError;
  - same epoch: the base sequence must be last sequence + 1 (2^31-1 wraps to 0) -> OutOfOrderSequenceError;
  - no state for the producer id (new, expired, or removed by retention): any sequence is accepted (KIP-360);
    UNKNOWN_PRODUCER_ID is therefore never raised.
- A transactional data batch opens a transaction (its first offset is remembered) unless one is open; a
  non-transactional data batch while one is open -> InvalidTxnStateError.
- A transaction marker (control batch): coordinator epoch lower than the producer's last one ->
  TransactionCoordinatorFencedError. Otherwise it sets the producer's epoch (a higher one is a bump: the cached
  batches are dropped, so the next batch must start at sequence 0) and coordinator epoch and closes the open
  transaction, which becomes a ``CompletedTxn`` (first offset .. marker offset). A marker without an open
  transaction completes nothing.
- Ongoing transactions and completed ones whose marker is not yet below the high watermark ("unreplicated",
  as Kafka calls them) make up ``first_unstable_offset``; ``on_high_watermark`` forgets the latter.
- Each completion carries the partition's last stable offset right after its marker (the first offset of the
  oldest other ongoing transaction, else marker + 1), computed batch by batch in offset order both on append
  and on replay, so the aborted-transaction index a replay writes equals the one appends wrote.
- REPLICATION appends (a follower copying its leader) skip the sequence, producer-epoch and coordinator-epoch
  checks, as Kafka's ProducerAppendInfo does (it only logs them); a non-transactional batch during an open
  transaction is still refused. Replay from the log (``replay``) applies batches without any validation.

Snapshot file ``<20-digit offset>.snapshot`` (state after every batch below that offset), big-endian::

    magic "OLPS" | version: u16 = 1 | crc32c: u32 (of everything after this field) | count: u32
    count x entry:
        producer_id: i64 | epoch: i16 | coordinator_epoch: i32 | last_timestamp: i64 | txn_first_offset: i64
        (-1 = none) | batches: u8 | batches x (first_seq: i32 | last_seq: i32 | first_offset: i64 |
        last_offset: i64 | timestamp: i64)
"""

from __future__ import annotations

import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import crc32c
from oncelog.protocol.records.batch import NO_PRODUCER_EPOCH, BatchHeader
from oncelog.storage.append_origin import AppendOrigin
from oncelog.storage.checkpoint import atomic_write
from oncelog.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from oncelog.storage.faults import fault_point
from oncelog.storage.txn_index import AbortedTxn
from oncelog.storage.txn_marker import EndTxnMarker

NUM_BATCHES_TO_RETAIN = 5  # ProducerStateEntry.NUM_BATCHES_TO_RETAIN (max.in.flight.requests.per.connection <= 5)
MAX_SEQUENCE = 0x7FFFFFFF  # Integer.MAX_VALUE; the next sequence after it is 0
SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_MAGIC = b"OLPS"
SNAPSHOT_VERSION = 1
_SNAP_HEADER = struct.Struct(">4sHI")
_COUNT = struct.Struct(">I")
_ENTRY = struct.Struct(">qhiqqB")
_BATCH = struct.Struct(">iiqqq")


class SnapshotCorruptError(Exception):
    """A snapshot file failed its magic, version, CRC or length check."""


@dataclass(frozen=True)
class BatchMetadata:
    """Sequence and offset range of one appended batch."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int


@dataclass(frozen=True)
class CompletedTxn:
    """A transaction closed by a marker: offsets ``first_offset`` .. ``last_offset`` (the marker)."""

    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


@dataclass(frozen=True)
class ProducerInfo:
    """One producer as DescribeProducers (KIP-664) reports it."""

    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int  # -1 when no transaction is open


@dataclass
class ProducerStateEntry:
    """What the partition knows of one producer id."""

    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    current_txn_first_offset: int | None = None

    def copy(self) -> ProducerStateEntry:
        return ProducerStateEntry(
            self.producer_id,
            self.epoch,
            deque(self.batches, maxlen=NUM_BATCHES_TO_RETAIN),
            self.coordinator_epoch,
            self.last_timestamp,
            self.current_txn_first_offset,
        )

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else -1

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """The cached batch with the same epoch and sequence range as ``header``, if any."""
        if header.producer_epoch != self.epoch:
            return None
        first, last = header.base_sequence, header.last_sequence
        for batch in self.batches:
            if batch.first_seq == first and batch.last_seq == last:
                return batch
        return None

    def _set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()

    def add_data_batch(self, header: BatchHeader) -> bool:
        """Record a data batch; True when it opened a transaction."""
        self._set_epoch(header.producer_epoch)
        self.batches.append(
            BatchMetadata(
                header.base_sequence,
                header.last_sequence,
                header.base_offset,
                header.last_offset,
                header.max_timestamp,
            )
        )
        self.last_timestamp = header.max_timestamp
        if header.is_transactional and self.current_txn_first_offset is None:
            self.current_txn_first_offset = header.base_offset
            return True
        return False

    def end_txn(self, header: BatchHeader, marker: EndTxnMarker) -> CompletedTxn | None:
        """Apply a marker (already validated); return the transaction it completes, if one was open."""
        completed = None
        if self.current_txn_first_offset is not None:
            completed = CompletedTxn(
                self.producer_id, self.current_txn_first_offset, header.base_offset, marker.is_abort
            )
        self._set_epoch(header.producer_epoch)
        self.coordinator_epoch = marker.coordinator_epoch
        self.current_txn_first_offset = None
        self.last_timestamp = header.max_timestamp
        return completed


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


class ProducerAppendInfo:
    """Validates one request's batches (in offset order) against a working copy of each producer's state.

    After the batches are written, ``ProducerStateManager.commit`` applies ``updated``, ``started`` and
    ``completed``; ``aborted`` lists the aborted-transaction index entries the write must add.
    """

    def __init__(self, manager: ProducerStateManager, origin: AppendOrigin = AppendOrigin.CLIENT) -> None:
        self._manager = manager
        self.origin = origin
        self.updated: dict[int, ProducerStateEntry] = {}
        self._current: dict[int, ProducerStateEntry | None] = {}
        self.started: dict[int, int] = {}  # first offset -> producer id of transactions opened here
        self.completed: list[tuple[CompletedTxn, int]] = []  # with the last stable offset after the marker
        self._closed: set[int] = set()  # first offsets of the transactions completed here

    def _entries(self, producer_id: int) -> tuple[ProducerStateEntry | None, ProducerStateEntry]:
        if producer_id not in self.updated:
            current = self._manager.producers.get(producer_id)
            self._current[producer_id] = current
            self.updated[producer_id] = current.copy() if current else ProducerStateEntry(producer_id)
        return self._current[producer_id], self.updated[producer_id]

    @property
    def aborted(self) -> list[AbortedTxn]:
        return [
            AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)
            for txn, lso in self.completed
            if txn.is_aborted
        ]

    def append(self, header: BatchHeader, marker: EndTxnMarker | None = None) -> None:
        """Validate ``header`` (offsets already assigned; ``marker`` given for a control batch) and apply it to
        the working copy, or raise."""
        current, updated = self._entries(header.producer_id)
        epoch = header.producer_epoch
        if epoch < updated.epoch and self.origin is not AppendOrigin.REPLICATION:
            raise InvalidProducerEpochError(
                f"epoch {epoch} of producer {header.producer_id} is older than the current {updated.epoch}"
            )
        if header.is_control:
            if marker is not None:
                self._append_marker(header, marker, updated)
            return
        if self.origin is AppendOrigin.CLIENT:
            self._check_sequence(header, current, updated)
        if updated.current_txn_first_offset is not None and not header.is_transactional:
            raise InvalidTxnStateError(
                f"non-transactional batch from producer {header.producer_id} during an open transaction"
            )
        if updated.add_data_batch(header):
            self.started[header.base_offset] = header.producer_id

    def _append_marker(self, header: BatchHeader, marker: EndTxnMarker, updated: ProducerStateEntry) -> None:
        if marker.coordinator_epoch < updated.coordinator_epoch and self.origin is not AppendOrigin.REPLICATION:
            raise TransactionCoordinatorFencedError(
                f"marker for producer {header.producer_id} has coordinator epoch {marker.coordinator_epoch}, "
                f"older than the current {updated.coordinator_epoch}"
            )
        completed = updated.end_txn(header, marker)
        if completed is not None:
            ongoing = {**self._manager.ongoing, **self.started}
            for first in self._closed:
                ongoing.pop(first, None)
            self.completed.append((completed, _last_stable_offset(completed, ongoing)))
            self._closed.add(completed.first_offset)

    @staticmethod
    def _check_sequence(header: BatchHeader, current: ProducerStateEntry | None, updated: ProducerStateEntry) -> None:
        seq = header.base_sequence
        epoch = header.producer_epoch
        if epoch != updated.epoch:
            if seq != 0 and updated.epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {header.producer_id} started epoch {epoch} at sequence {seq}, expected 0"
                )
            return
        if updated.batches:
            last_seq = updated.last_seq
        elif current is not None and epoch == current.epoch:
            last_seq = current.last_seq
        else:
            last_seq = -1
        no_state = current is None or current.epoch == NO_PRODUCER_EPOCH
        if not (no_state or _in_sequence(last_seq, seq)):
            raise OutOfOrderSequenceError(f"producer {header.producer_id} sent sequence {seq}, expected {last_seq + 1}")


def _last_stable_offset(txn: CompletedTxn, ongoing: dict[int, int]) -> int:
    """LSO right after ``txn``'s marker: the oldest other producer's open transaction, else marker + 1."""
    others = [first for first, pid in ongoing.items() if pid != txn.producer_id]
    return min(others) if others else txn.last_offset + 1


class ProducerStateManager:
    """Producer entries of one partition, their snapshots, and expiration."""

    def __init__(self, directory: Path, producer_id_expiration_ms: int) -> None:
        self.directory = directory
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.ongoing: dict[int, int] = {}  # first offset -> producer id of every open transaction
        self.unreplicated: dict[int, CompletedTxn] = {}  # completed, marker not yet below the high watermark

    # ------------------------------------------------------------------------------------- queries
    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """The already-appended batch ``header`` retries, judged against the committed state."""
        entry = self.producers.get(header.producer_id)
        return entry.find_duplicate(header) if entry else None

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest transaction that is open, or completed with its marker not yet below the
        high watermark (see ``on_high_watermark``); None when there is none."""
        first = min(self.ongoing, default=None)
        unreplicated = min(self.unreplicated, default=None)
        if first is None or (unreplicated is not None and unreplicated < first):
            return unreplicated
        return first

    def active_producers(self) -> list[ProducerInfo]:
        """Every producer with state in this partition, by producer id (for DescribeProducers)."""
        return [
            ProducerInfo(
                e.producer_id,
                e.epoch,
                e.last_seq,
                e.last_timestamp,
                e.coordinator_epoch,
                -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
            )
            for _pid, e in sorted(self.producers.items())
        ]

    # ------------------------------------------------------------------------------------- updates
    def prepare(self, origin: AppendOrigin = AppendOrigin.CLIENT) -> ProducerAppendInfo:
        """Start validating one request; ``commit`` it once the batches are written."""
        return ProducerAppendInfo(self, origin)

    def commit(self, info: ProducerAppendInfo) -> None:
        self.producers.update(info.updated)
        self.ongoing.update(info.started)
        for txn, _lso in info.completed:
            self._complete(txn)

    def _complete(self, txn: CompletedTxn) -> None:
        self.ongoing.pop(txn.first_offset, None)
        self.unreplicated[txn.first_offset] = txn

    def replay(self, header: BatchHeader, marker: EndTxnMarker | None = None) -> AbortedTxn | None:
        """Apply a batch read back from the log, without validation (``marker`` given for a control batch).

        Returns the aborted-transaction index entry the batch produces, if it is an ABORT marker closing an
        open transaction.
        """
        if header.producer_id < 0 or (header.is_control and marker is None):
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerStateEntry(header.producer_id)
        if not header.is_control:
            if entry.add_data_batch(header):
                self.ongoing[header.base_offset] = header.producer_id
            return None
        assert marker is not None
        txn = entry.end_txn(header, marker)
        if txn is None:
            return None
        lso = _last_stable_offset(txn, self.ongoing)
        self._complete(txn)
        return AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso) if txn.is_aborted else None

    def on_high_watermark(self, high_watermark: int) -> None:
        """Forget completed transactions whose marker is below ``high_watermark`` (also used for the log
        start offset)."""
        for first in [f for f, txn in self.unreplicated.items() if txn.last_offset < high_watermark]:
            del self.unreplicated[first]

    def expire_producers(self, now_ms: int) -> int:
        """Drop producers idle for producer.id.expiration.ms without an open transaction; return how many."""
        expired = [pid for pid, e in self.producers.items() if self._is_expired(e, now_ms)]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    def _is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return (
            entry.current_txn_first_offset is None and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms
        )

    def truncate(self) -> None:
        """Forget every producer and transaction (before a rebuild)."""
        self.producers.clear()
        self.ongoing.clear()
        self.unreplicated.clear()

    # ------------------------------------------------------------------------------------- snapshots
    def snapshot_path(self, offset: int) -> Path:
        return self.directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"

    def snapshot_offsets(self) -> list[int]:
        """Offsets of the snapshot files on disk, ascending."""
        offsets = []
        for path in self.directory.glob(f"*{SNAPSHOT_SUFFIX}"):
            stem = path.name[: -len(SNAPSHOT_SUFFIX)]
            if stem.isdigit():
                offsets.append(int(stem))
        return sorted(offsets)

    def take_snapshot(self, offset: int) -> None:
        """Atomically write the current state as ``<offset>.snapshot``."""
        fault_point("storage.snapshot")
        atomic_write(self.snapshot_path(offset), encode_snapshot(self.producers.values()))

    def load_snapshot(self, offset: int, now_ms: int | None) -> None:
        """Replace the state with snapshot ``offset``, skipping expired producers when ``now_ms`` is given.

        Raises SnapshotCorruptError (or OSError) and leaves the state empty when it cannot be read.
        """
        self.truncate()
        entries = decode_snapshot(self.snapshot_path(offset).read_bytes())
        for entry in entries:
            if now_ms is None or not self._is_expired(entry, now_ms):
                self.producers[entry.producer_id] = entry
                if entry.current_txn_first_offset is not None:
                    self.ongoing[entry.current_txn_first_offset] = entry.producer_id

    def delete_snapshots(self, *, below: int | None = None, above: int | None = None) -> None:
        """Delete snapshot files with offset < ``below`` and/or > ``above``."""
        for offset in self.snapshot_offsets():
            if (below is not None and offset < below) or (above is not None and offset > above):
                self.snapshot_path(offset).unlink(missing_ok=True)


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """Serialize producer entries in the snapshot format of the module docstring."""
    body = bytearray(_COUNT.size)
    count = 0
    for e in entries:
        txn = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
        body += _ENTRY.pack(e.producer_id, e.epoch, e.coordinator_epoch, e.last_timestamp, txn, len(e.batches))
        for b in e.batches:
            body += _BATCH.pack(b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.timestamp)
        count += 1
    _COUNT.pack_into(body, 0, count)
    return _SNAP_HEADER.pack(SNAPSHOT_MAGIC, SNAPSHOT_VERSION, crc32c.crc32c(body)) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Parse a snapshot; raises SnapshotCorruptError on a bad magic, version, CRC or length."""
    if len(data) < _SNAP_HEADER.size + _COUNT.size:
        raise SnapshotCorruptError("snapshot is truncated")
    magic, version, crc = _SNAP_HEADER.unpack_from(data)
    if magic != SNAPSHOT_MAGIC or version != SNAPSHOT_VERSION:
        raise SnapshotCorruptError(f"bad snapshot magic {magic!r} or version {version}")
    body = memoryview(data)[_SNAP_HEADER.size :]
    if crc32c.crc32c(body) != crc:
        raise SnapshotCorruptError("snapshot CRC mismatch")
    try:
        (count,) = _COUNT.unpack_from(body)
        pos = _COUNT.size
        entries = []
        for _ in range(count):
            pid, epoch, coord_epoch, last_ts, txn, nbatches = _ENTRY.unpack_from(body, pos)
            pos += _ENTRY.size
            batches: deque[BatchMetadata] = deque(maxlen=NUM_BATCHES_TO_RETAIN)
            for _ in range(nbatches):
                batches.append(BatchMetadata(*_BATCH.unpack_from(body, pos)))
                pos += _BATCH.size
            entries.append(ProducerStateEntry(pid, epoch, batches, coord_epoch, last_ts, None if txn < 0 else txn))
    except struct.error as exc:
        raise SnapshotCorruptError(f"snapshot is truncated: {exc}") from exc
    if pos != len(body):
        raise SnapshotCorruptError("trailing bytes after the snapshot entries")
    return entries
