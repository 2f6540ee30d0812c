"""Network partitions (Jepsen-style) on three brokers and etcd: a broker is cut off from the other brokers and from
etcd (``support/netproxy.py``) while stock confluent-kafka clients, still reaching every broker, write idempotently
and transactionally and read with read_committed; ``support/jepsen.check`` then looks for lost acknowledged writes,
duplicates, two values at one offset, aborted reads and reads of uncommitted writes in the whole history.

The short form cuts off the coordinator of the transactional id (which also leads data partitions) asymmetrically:
nothing reaches it and it has no etcd, but it may still open connections to the other brokers, so as a zombie
coordinator it could still send them WriteTxnMarkers. ``tests/torture/partition_torture.py`` is the long form: many
cuts of coordinators, leaders and random brokers, symmetric or not.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from support.jepsen import ABORTED, COMMITTED, INDETERMINATE, Cut, History, check, run_with_cuts
from support.partitioned_cluster import PartitionedCluster


@pytest.fixture
def cluster() -> Iterator[PartitionedCluster]:
    running = PartitionedCluster(3)
    try:
        running.start()
        yield running
    finally:
        running.close()


def test_a_broker_cut_off_from_the_cluster_and_etcd_loses_nothing_and_shows_nothing_uncommitted(
    cluster: PartitionedCluster,
) -> None:
    history = run_with_cuts(cluster, [Cut("coordinator", outbound=True)], rest_s=3.0)
    summary = history.summary()
    assert summary["acked"] > 100 and summary["committed_txns"] >= 2, summary
    assert check(history) == [], summary


def good_history() -> History:
    history = History()
    history.acked = {b"w0": (0, 0), b"w1": (1, 0)}
    history.txns = {1: ([b"t1-0", b"t1-1"], COMMITTED), 2: ([b"t2-0", b"t2-1"], ABORTED)}
    history.txns[3] = ([b"t3-0", b"t3-1"], INDETERMINATE)
    history.final = [(0, 0, b"w0"), (1, 0, b"w1"), (0, 3, b"t1-0"), (1, 3, b"t1-1"), (0, 6, b"t3-0"), (1, 6, b"t3-1")]
    history.reads = history.final[:3]
    return history


@pytest.mark.parametrize(
    ("damage", "found"),
    [
        (lambda h: h.final.remove((1, 0, b"w1")), "lost acknowledged write b'w1'"),
        (lambda h: h.final.remove((1, 3, b"t1-1")), "lost committed transaction 1"),
        (lambda h: h.final.append((2, 9, b"w0")), "duplicate b'w0'"),
        (lambda h: h.reads.append((0, 0, b"w9")), "two values at (0, 0)"),
        (lambda h: h.reads.append((2, 4, b"t2-1")), "aborted read b't2-1'"),
        (lambda h: h.final.remove((1, 6, b"t3-1")), "uncommitted read: part of transaction 3"),
        (lambda h: h.acked.update({b"w2": (2, 0)}) or h.final.append((2, 0, b"w3")), "acknowledged b'w2' at (2, 0)"),
    ],
)
def test_the_checker_finds_each_anomaly(damage: Callable[[History], object], found: str) -> None:
    assert check(good_history()) == []
    history = good_history()
    damage(history)
    assert any(problem.startswith(found) for problem in check(history)), check(history)
