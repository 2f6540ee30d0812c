"""What a compaction pass keeps of each batch: decided in one walk over the cleanable range before any is rewritten.

Kafka's LogCleaner rules, for a range wholly below the last stable offset (so every transaction in it is decided):

- A key's records before its latest one in the range go; records of aborted transactions never count as latest.
  Records without a key go too (a log switched to compaction may hold some).
- Batches of an aborted transaction go whole (the aborted list comes from the log's transaction indexes, which
  may lie past the range: the ABORT marker can be in a later segment).
- A COMMIT marker goes once no batch of its transaction is left in the range, an ABORT marker once no batch of its
  transaction was met in this pass; both only when their segment is older than delete.retention.ms, like
  tombstones. A marker thus outlives its transaction's data by at least one pass, so the log never holds
  transactional data without its marker (which a reload would take for an open transaction).
- Each active producer's last data batch (or, when it has none since its epoch began, its markers of the current
  epoch) stays, so that its sequence and epoch survive a rebuild of producer state from the log. Kafka keeps such
  a batch's header even when all its records go; this keeps the batch whole. Its keys are pinned: their
  tombstones stay, or an older record kept here would outlive them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from oncelog.protocol.records.batch import BatchHeader
from oncelog.protocol.records.codec import Record, decode_batch
from oncelog.storage.txn_marker import read_end_txn_marker


@dataclass(frozen=True)
class LogTransactions:
    """What the log knows, when a pass starts, that the range's batches alone do not say."""

    #: (producer id, first offset, marker offset) of every aborted transaction overlapping the range, by first
    #: offset. The marker offset bounds the transaction once its marker itself is compacted away.
    aborted: Sequence[tuple[int, int, int]] = ()
    #: Per active producer id: the last offset of its last data batch (None: none since its epoch began) and
    #: its epoch.
    last_batches: dict[int, tuple[int | None, int]] = field(default_factory=dict)

    def is_producers_last(self, header: BatchHeader) -> bool:
        """Whether the batch is what keeps its producer's sequence and epoch in the log."""
        known = self.last_batches.get(header.producer_id)
        if known is None:
            return False
        last_data_offset, epoch = known
        if last_data_offset is None:
            return header.is_control and header.producer_epoch == epoch
        return not header.is_control and header.last_offset == last_data_offset


#: For a log without idempotent or transactional producers.
NO_TRANSACTIONS = LogTransactions()


@dataclass
class CompactionPlan:
    """A pass's decisions, by batch base offset and by key."""

    #: Each key's highest offset among the records that make earlier ones of their key obsolete.
    latest: dict[bytes, int] = field(default_factory=dict)
    #: Keys with a record in a batch kept whole: their tombstones stay.
    pinned: set[bytes] = field(default_factory=set)
    #: Batches that go whole: aborted data, finished markers.
    dropped: set[int] = field(default_factory=set)
    #: Batches kept as they are: producers' last batches, markers, aborted data a producer's last batch holds.
    whole: set[int] = field(default_factory=set)

    def keeps(self, record: Record, drop_tombstones: bool) -> bool:
        """Whether a record of a batch that is neither dropped nor kept whole stays."""
        key = record.key
        if key is None:
            return False  # as Kafka's cleaner: only a log that was not always compacted holds such records
        if self.latest.get(key) != record.offset:
            return False
        return record.value is not None or not drop_tombstones or key in self.pinned


def plan_pass(
    segments: Iterable[tuple[bool, Iterable[tuple[BatchHeader, bytes]]]], transactions: LogTransactions
) -> CompactionPlan:
    """Decide every batch of the range: ``segments`` gives, oldest first, whether the segment is past the delete
    horizon (its tombstones and markers may go) and its batches with their bytes."""
    plan = CompactionPlan()
    aborted = deque(transactions.aborted)
    # Producer id -> [its aborted transaction's marker offset, whether a batch of it was met in this pass].
    open_aborted: dict[int, list] = {}
    open_committed: set[int] = set()  # producers with a met batch of a committed transaction before its marker
    for past_horizon, batches in segments:
        for header, data in batches:
            while aborted and aborted[0][1] <= header.last_offset:
                producer, _first, marker_offset = aborted.popleft()
                open_aborted[producer] = [marker_offset, False]
            base, producer_id = header.base_offset, header.producer_id
            if producer_id < 0:
                if header.is_control:
                    plan.whole.add(base)
                else:
                    _plan_records(plan, header, data, producers_last=False, is_aborted=False)
                continue
            run = open_aborted.get(producer_id)
            if run is not None and run[0] < base:  # its marker was compacted away in an earlier pass
                del open_aborted[producer_id]
                run = None
            producers_last = transactions.is_producers_last(header)
            if header.is_control:
                if read_end_txn_marker(data, 0, header).is_abort:
                    finished = run is None or not run[1]
                    open_aborted.pop(producer_id, None)
                else:
                    finished = producer_id not in open_committed
                    open_committed.discard(producer_id)
                (plan.dropped if finished and past_horizon and not producers_last else plan.whole).add(base)
                continue
            is_aborted = header.is_transactional and run is not None
            if is_aborted:
                run[1] = True
                if not producers_last:
                    plan.dropped.add(base)
                    continue
            elif header.is_transactional:
                open_committed.add(producer_id)
            _plan_records(plan, header, data, producers_last=producers_last, is_aborted=is_aborted)
    return plan


def _plan_records(
    plan: CompactionPlan, header: BatchHeader, data: bytes, *, producers_last: bool, is_aborted: bool
) -> None:
    """Index a data batch's keys (a producer's last batch is kept whole and pins its keys)."""
    if producers_last:
        plan.whole.add(header.base_offset)
    for record in decode_batch(data)[1]:
        if record.key is None:
            continue
        if producers_last:
            plan.pinned.add(record.key)
        if not is_aborted:
            plan.latest[record.key] = record.offset
