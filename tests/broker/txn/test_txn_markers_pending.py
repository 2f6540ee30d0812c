"""A transaction whose markers cannot all be written yet (a partition's leader is away): EndTxn answers with the
decided outcome after MARKER_ANSWER_WAIT_MS, the transaction stays prepared (CONCURRENT_TRANSACTIONS to its
producer) and the background delivery completes it once the markers are written, writing each marker once."""

from __future__ import annotations

import pytest
import trio
from oncelog.broker.txn import coordinator as coordinator_module
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


@pytest.mark.parametrize("commit", [True, False])
async def test_end_txn_answers_while_a_marker_is_pending_and_the_delivery_completes_it(
    start_broker, monkeypatch, commit: bool
) -> None:
    monkeypatch.setattr(coordinator_module, "MARKER_ANSWER_WAIT_MS", 200)
    broker = await start_broker()
    transactions = broker.node.transactions
    markers = GatedMarkers()
    monkeypatch.setattr(transactions, "_markers", markers)
    error, pid, epoch = await transactions.init_producer_id("t", 60_000, -1, -1, FENCED)
    assert error == ErrorCode.NONE
    partitions = [("a", 0), ("b", 0)]
    assert await transactions.add_partitions("t", pid, epoch, partitions, FENCED) == ErrorCode.NONE

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
