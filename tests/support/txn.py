"""Client-independent helpers for the transactional interop tests: expected log layout, checkers, polling.

A partition's log under transactions is a run of data records per transaction followed by one control record
(the COMMIT or ABORT marker) that takes an offset of its own. ``TxnLog`` replays a sequence of transactional and
plain writes and says where every record must land, what the log end offset is, and what a read_committed or
read_uncommitted consumer must see. Guaranteed: it models Kafka's layout exactly for producers that write each
partition's records in order (which every idempotent/transactional client does).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from .dataset import CheckReport, Consumed, Delivered, SampleRecord

T = TypeVar("T")

ERR_INVALID_TRANSACTION_TIMEOUT = 50  # Kafka error INVALID_TRANSACTION_TIMEOUT

# transaction.abort.timed.out.transaction.cleanup.interval.ms: Kafka default 10000; lowered so that the tests
# see timed-out transactions aborted within about a second of their timeout.
CLEANUP_INTERVAL_MS = 500
TXN_BROKER_SETTINGS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": CLEANUP_INTERVAL_MS}


def round_robin(index: int, partitions: int) -> int:
    """The partition the tests send record ``index`` to (explicitly, so every partition gets records)."""
    return index % partitions


@dataclass
class TxnLog:
    """Expected contents of a topic after a sequence of writes (see the module docstring)."""

    partitions: int
    records: Sequence[SampleRecord]
    place: dict[int, tuple[int, int]] = field(default_factory=dict)  # record index -> (partition, offset)
    committed: set[int] = field(default_factory=set)  # indexes visible to read_committed
    end: dict[int, int] = field(default_factory=lambda: defaultdict(int))  # partition -> log end offset
    open: dict[int, int] = field(default_factory=dict)  # partition -> first offset of the open transaction
    _pending: list[int] = field(default_factory=list)

    def write(self, indexes: Iterable[int], *, transactional: bool) -> None:
        """Append records (each to ``round_robin(i)``); transactional ones stay pending until ``end_txn``."""
        for i in indexes:
            p = round_robin(i, self.partitions)
            self.place[i] = (p, self.end[p])
            if transactional:
                self.open.setdefault(p, self.end[p])
                self._pending.append(i)
            else:
                self.committed.add(i)
            self.end[p] += 1

    def end_txn(self, *, commit: bool) -> None:
        """Write one marker to every partition the open transaction touched; commit or drop its records."""
        for p in self.open:
            self.end[p] += 1
        if commit:
            self.committed.update(self._pending)
        self._pending.clear()
        self.open.clear()

    def transaction(self, indexes: Iterable[int], *, commit: bool) -> None:
        """``write(transactional=True)`` then ``end_txn``."""
        self.write(indexes, transactional=True)
        self.end_txn(commit=commit)

    def lso(self, partition: int) -> int:
        """Last stable offset: first offset of the open transaction, else the log end offset."""
        return self.open.get(partition, self.end[partition])

    def visible(self, *, read_committed: bool) -> list[int]:
        """Record indexes a consumer must see, sorted by (partition, offset)."""
        if read_committed:
            idx: Iterable[int] = (i for i in self.committed if self.place[i][1] < self.lso(self.place[i][0]))
        else:
            idx = self.place
        return sorted(idx, key=lambda i: self.place[i])


def check_delivered(log: TxnLog, delivered: Iterable[Delivered]) -> None:
    """Every delivery report names the (partition, offset) the layout predicts (markers leave gaps)."""
    rep = CheckReport()
    for d in delivered:
        want = log.place.get(d.index)
        if want is None:
            rep.add(f"delivery report for unknown record {d.index}")
        elif (d.partition, d.offset) != want:
            rep.add(f"record {d.index} delivered at {d.partition}/{d.offset}, expected {want[0]}/{want[1]}")
    rep.raise_if_any()


def check_consumed(log: TxnLog, consumed: Sequence[Consumed], *, read_committed: bool) -> None:
    """The consumer saw exactly the visible records, each at its predicted offset with every field intact,
    in offset order within each partition."""
    rep = CheckReport()
    want = log.visible(read_committed=read_committed)
    by_partition: dict[int, list[Consumed]] = defaultdict(list)
    for c in consumed:
        by_partition[c.partition].append(c)
    got_positions = sorted((c.partition, c.offset) for c in consumed)
    want_positions = [log.place[i] for i in want]
    if got_positions != want_positions:
        extra = sorted(set(got_positions) - set(want_positions))
        missing = sorted(set(want_positions) - set(got_positions))
        rep.add(
            f"consumed {len(got_positions)} records, expected {len(want_positions)}; "
            f"unexpected {extra[:8]}, missing {missing[:8]}"
        )
    for p, cs in by_partition.items():
        offsets = [c.offset for c in cs]
        if offsets != sorted(offsets):
            rep.add(f"partition {p} consumed out of order: {offsets[:10]}")
    at = {pos: i for i, pos in log.place.items()}
    for c in consumed:
        i = at.get((c.partition, c.offset))
        if i is None:
            continue
        rec = log.records[i]
        for name, got, exp in (
            ("key", c.key, rec.key),
            ("value", c.value, rec.value),
            ("headers", c.headers, rec.headers),
            ("timestamp", c.timestamp_ms, rec.timestamp_ms),
        ):
            if got != exp:
                rep.add(f"record {i} at {c.partition}/{c.offset}: {name} {got!r:.80} != {exp!r:.80}")
    rep.raise_if_any()


def wait_for(what: str, probe: Callable[[], T], ok: Callable[[T], bool], deadline_s: float = 15.0) -> T:
    """Call ``probe`` every 100 ms until ``ok(result)``; return that result or raise AssertionError naming
    ``what`` and the last result."""
    end = time.monotonic() + deadline_s
    while True:
        last = probe()
        if ok(last):
            return last
        if time.monotonic() > end:
            raise AssertionError(f"{what}: still {last!r} after {deadline_s}s")
        time.sleep(0.1)
