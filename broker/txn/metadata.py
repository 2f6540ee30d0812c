"""A transactional id's state and Kafka's legal transitions between states (TransactionMetadata, TransactionState)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

# The one transaction-state enum lives in protocol: its ids are the `__transaction_state` storage format.
from oncelog.protocol.internal.transaction_log import TxnState

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
#: Kafka's TransactionMetadata.isEpochExhausted: an epoch this high cannot be bumped again (Short.MaxValue - 1).
EXHAUSTED_EPOCH = 32766
#: Kafka's TransactionVersion: TV_0 for clients that keep their epoch; TV_2 (KIP-890 part 2, EndTxn v5+) bumps the
#: producer epoch at the end of every transaction.
TV_0 = 0
TV_2 = 2


#: Kafka's TransactionState.validPreviousStates.
VALID_PREVIOUS_STATES: dict[TxnState, frozenset[TxnState]] = {
    TxnState.EMPTY: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.ONGOING: frozenset({TxnState.ONGOING, TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_COMMIT: frozenset({TxnState.ONGOING}),
    TxnState.PREPARE_ABORT: frozenset({TxnState.ONGOING, TxnState.PREPARE_EPOCH_FENCE}),
    TxnState.COMPLETE_COMMIT: frozenset({TxnState.PREPARE_COMMIT}),
    TxnState.COMPLETE_ABORT: frozenset({TxnState.PREPARE_ABORT}),
    TxnState.DEAD: frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT}),
    TxnState.PREPARE_EPOCH_FENCE: frozenset({TxnState.ONGOING}),
}

COMPLETED_STATES = frozenset({TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT})
PREPARED_STATES = frozenset({TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT})


class IllegalTransitionError(Exception):
    """A state change Kafka's coordinator would never make; a bug, not a client error."""


def epoch_exhausted(epoch: int) -> bool:
    return epoch >= EXHAUSTED_EPOCH


@dataclass(frozen=True)
class TransactionMetadata:
    """Everything the coordinator knows about one transactional id. Immutable: a change makes a new object,
    which replaces the old one only after it is durable in ``__transaction_state``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState
    partitions: frozenset[tuple[str, int]] = field(default_factory=frozenset)
    start_timestamp_ms: int = -1
    last_update_timestamp_ms: int = -1
    #: The previous producer id/epoch, kept in memory so a retried InitProducerId is recognised (KIP-360).
    last_producer_id: int = NO_PRODUCER_ID
    last_producer_epoch: int = NO_PRODUCER_EPOCH
    #: TV_2 when the last EndTxn bumped the epoch (KIP-890 part 2); AddPartitionsToTxn v0-3 sets TV_0 again.
    client_transaction_version: int = TV_0
    #: The producer id the transaction moves to on completion, when its epoch bump would overflow (TV_2 only).
    next_producer_id: int = NO_PRODUCER_ID

    def transition(self, state: TxnState, now_ms: int, **changes: object) -> TransactionMetadata:
        """A copy in ``state`` with ``changes`` applied; raises IllegalTransitionError for an illegal change."""
        if self.state not in VALID_PREVIOUS_STATES[state]:
            raise IllegalTransitionError(f"{self.transactional_id}: {self.state.name} -> {state.name}")
        return dataclasses.replace(self, state=state, last_update_timestamp_ms=now_ms, **changes)  # type: ignore[arg-type]

    @property
    def bumps_epoch_on_end(self) -> bool:
        """The current (or last) transaction was ended with a per-transaction epoch bump (KIP-890 part 2)."""
        return self.client_transaction_version >= TV_2

    def is_expired(self, now_ms: int) -> bool:
        """An ongoing transaction past its timeout (the coordinator aborts it)."""
        return self.state == TxnState.ONGOING and self.start_timestamp_ms + self.timeout_ms < now_ms
