"""A transaction whose markers cannot all be written yet (a partition's leader is away): EndTxn answers with the
decided outcome after ``transaction.marker.wait.ms`` (at once with 0, Kafka's order), the transaction stays
prepared (CONCURRENT_TRANSACTIONS to its producer), and the background delivery completes it once the markers are
written, writing each marker once."""

from __future__ import annotations

import pytest
import trio
from oncelog.broker.txn.markers import TxnMarker
from oncelog.broker.txn.metadata import TxnState
from oncelog.protocol import ErrorCode

FENCED = ErrorCode.PRODUCER_FENCED


class GatedMarkers:
    """A marker writer whose writes finish only once ``gate`` is set (a leader that is away until then)."""

    def __init__(self) -> None:
        self.gate = trio.Event()
        self.writes: list[TxnMarker] = []

    async def write(self, marker: TxnMarker) -> dict[tuple[str, int], ErrorCode]:
        self.writes.append(marker)
        await self.gate.wait()
        return dict.fromkeys(marker.partitions, ErrorCode.NONE)


async def _ongoing(start_broker, monkeypatch, marker_wait_ms: int, partitions: list[tuple[str, int]]):
    """A broker whose coordinator writes markers through GatedMarkers, and an id "t" with an ongoing transaction over
    ``partitions``: (coordinator, markers, producer id, epoch)."""
    broker = await start_broker(properties={"transaction.marker.wait.ms": str(marker_wait_ms)})
    transactions = broker.node.transactions
    markers = GatedMarkers()
    monkeypatch.setattr(transactions, "_markers", markers)
    error, pid, epoch = await transactions.init_producer_id("t", 60_000, -1, -1, FENCED)
    assert error == ErrorCode.NONE
    assert await transactions.add_partitions("t", pid, epoch, partitions, FENCED) == ErrorCode.NONE
    return transactions, markers, pid, epoch


@pytest.mark.parametrize("commit", [True, False])
async def test_end_txn_answers_while_a_marker_is_pending_and_the_delivery_completes_it(
    start_broker, monkeypatch, commit: bool
) -> None:
    partitions = [("a", 0), ("b", 0)]
    transactions, markers, pid, epoch = await _ongoing(start_broker, monkeypatch, 200, partitions)

    with trio.fail_after(5):
        assert await transactions.end_transaction("t", pid, epoch, commit, FENCED) == (ErrorCode.NONE, pid, epoch)
    prepared = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
    assert transactions.get("t").state == prepared
    # The producer waits for the transaction to complete, whatever it asks.
    assert await transactions.add_partitions("t", pid, epoch, partitions, FENCED) == ErrorCode.CONCURRENT_TRANSACTIONS
    error, *_ = await transactions.end_transaction("t", pid, epoch, commit, FENCED)
    assert error == ErrorCode.CONCURRENT_TRANSACTIONS
    error, *_ = await transactions.init_producer_id("t", 60_000, pid, epoch, FENCED)
    assert error == ErrorCode.CONCURRENT_TRANSACTIONS
    await transactions.complete_pending()  # the periodic check leaves a delivery under way alone

    markers.gate.set()  # the leader is back
    with trio.fail_after(5):
        while transactions.get("t").state == prepared:
            await trio.sleep(0.01)
    assert transactions.get("t").state == (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT)
    assert len(markers.writes) == 1 and markers.writes[0].partitions == frozenset(partitions)
    assert markers.writes[0].commit is commit
    assert transactions._deliveries == {}
    error, _pid, next_epoch = await transactions.init_producer_id("t", 60_000, pid, epoch, FENCED)
    assert (error, next_epoch) == (ErrorCode.NONE, epoch + 1)


@pytest.mark.parametrize("commit", [True, False])
async def test_with_no_marker_wait_end_txn_answers_once_prepared_and_the_next_transaction_waits_for_its_markers(
    start_broker, monkeypatch, commit: bool
) -> None:
    """Kafka's order (``transaction.marker.wait.ms=0``): EndTxn is answered once PrepareCommit/PrepareAbort is
    durable, before any marker is written; the producer's next transaction meets CONCURRENT_TRANSACTIONS until the
    markers and the Complete* record are written."""
    partitions = [("a", 0), ("b", 0)]
    transactions, markers, pid, epoch = await _ongoing(start_broker, monkeypatch, 0, partitions)

    with trio.fail_after(2):  # the markers cannot be written before the gate opens: this answer did not wait
        assert await transactions.end_transaction("t", pid, epoch, commit, FENCED) == (ErrorCode.NONE, pid, epoch)
    assert transactions.get("t").state == (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT)
    with trio.fail_after(2):
        while not markers.writes:  # the delivery starts in the background
            await trio.sleep(0.01)
    assert [m.commit for m in markers.writes] == [commit]

    assert await transactions.add_partitions("t", pid, epoch, [("c", 0)], FENCED) == ErrorCode.CONCURRENT_TRANSACTIONS
    markers.gate.set()
    with trio.fail_after(5):
        while transactions.get("t").state != (TxnState.COMPLETE_COMMIT if commit else TxnState.COMPLETE_ABORT):
            await trio.sleep(0.01)
    assert await transactions.add_partitions("t", pid, epoch, [("c", 0)], FENCED) == ErrorCode.NONE
    metadata = transactions.get("t")
    assert metadata.state == TxnState.ONGOING and metadata.partitions == frozenset({("c", 0)})
    assert len(markers.writes) == 1 and transactions._deliveries == {}


async def test_with_no_marker_wait_markers_reach_the_partitions(start_broker) -> None:
    """With the real marker writer and ``transaction.marker.wait.ms=0``, the markers follow the answer: the
    partition's last stable offset passes the transaction once the delivery is done."""
    broker = await start_broker(properties={"transaction.marker.wait.ms": "0"})
    transactions = broker.node.transactions
    await broker.node.topics.create("out", 1)
    error, pid, epoch = await transactions.init_producer_id("t", 60_000, -1, -1, FENCED)
    assert error == ErrorCode.NONE
    assert await transactions.add_partitions("t", pid, epoch, [("out", 0)], FENCED) == ErrorCode.NONE
    error, *_ = await transactions.end_transaction("t", pid, epoch, True, FENCED)
    assert error == ErrorCode.NONE
    with trio.fail_after(5):
        while transactions.get("t").state != TxnState.COMPLETE_COMMIT:
            await trio.sleep(0.01)
    partition_log = broker.node.replicas.get_log("out", 0)
    assert partition_log.log_end_offset == 1  # the COMMIT marker, the transaction's only record
    assert partition_log.last_stable_offset == 1
