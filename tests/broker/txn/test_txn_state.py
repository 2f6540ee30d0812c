"""Transaction metadata transitions and replay of __transaction_state (last record per id wins, tombstones)."""

from __future__ import annotations

import itertools

import pytest
from oncelog.broker.txn.metadata import IllegalTransitionError, TransactionMetadata, TxnState

E, ON, PC, PA, CC, CA, D, PF = (
    TxnState.EMPTY,
    TxnState.ONGOING,
    TxnState.PREPARE_COMMIT,
    TxnState.PREPARE_ABORT,
    TxnState.COMPLETE_COMMIT,
    TxnState.COMPLETE_ABORT,
    TxnState.DEAD,
    TxnState.PREPARE_EPOCH_FENCE,
)
# Kafka's TransactionState: every legal (from, to) pair, written out independently of the implementation.
LEGAL = {
    (E, E),
    (CC, E),
    (CA, E),
    (ON, ON),
    (E, ON),
    (CC, ON),
    (CA, ON),
    (ON, PC),
    (ON, PA),
    (PF, PA),
    (PC, CC),
    (PA, CA),
    (E, D),
    (CC, D),
    (CA, D),
    (ON, PF),
}


def _metadata(state: TxnState) -> TransactionMetadata:
    return TransactionMetadata("t", 1, 0, 1000, state)


@pytest.mark.parametrize(("before", "after"), list(itertools.product(TxnState, TxnState)))
def test_transition_is_legal_exactly_as_in_kafka(before: TxnState, after: TxnState) -> None:
    if (before, after) in LEGAL:
        moved = _metadata(before).transition(after, 5)
        assert (moved.state, moved.last_update_timestamp_ms) == (after, 5)
    else:
        with pytest.raises(IllegalTransitionError):
            _metadata(before).transition(after, 5)


def test_expiry_only_for_ongoing_transactions_past_their_timeout() -> None:
    ongoing = TransactionMetadata("t", 1, 0, 1000, ON, start_timestamp_ms=100)
    assert not ongoing.is_expired(1100) and ongoing.is_expired(1101)
    assert not TransactionMetadata("t", 1, 0, 1000, CC, start_timestamp_ms=100).is_expired(10_000)


async def test_replay_keeps_the_last_record_per_id_and_honours_tombstones(start_broker, tmp_path) -> None:
    data = tmp_path / "replay"
    broker = await start_broker(data)
    state_log = broker.node.transactions.state_log
    first = TransactionMetadata("a", 10, 0, 1000, E, last_update_timestamp_ms=1)
    await state_log.write(first, "a")
    await state_log.write(first.transition(ON, 2, partitions=frozenset({("x", 0)}), start_timestamp_ms=2), "a")
    await state_log.write(TransactionMetadata("b", 11, 4, 1000, E, last_update_timestamp_ms=3), "b")
    await state_log.write(None, "b")
    await state_log.write(TransactionMetadata("c", 12, 1, 500, CA, last_update_timestamp_ms=4), "c")
    await broker.stop()

    broker = await start_broker(data)
    coordinator = broker.node.transactions
    assert coordinator.get("b") is None
    a, c = coordinator.get("a"), coordinator.get("c")
    assert (a.state, a.producer_id, a.partitions, a.start_timestamp_ms) == (ON, 10, frozenset({("x", 0)}), 2)
    assert (c.state, c.producer_epoch, c.timeout_ms) == (CA, 1, 500)
