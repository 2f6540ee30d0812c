"""EndTxn v5 (KIP-890 part 2): every transaction ends with a bumped producer epoch, which closes KAFKA-17754.

A delayed copy of an EndTxn v5 carries the epoch its transaction ran with. While the producer is idle it is answered
as a retry (NONE, with the new epoch, nothing written); once the producer's next transaction has begun with the new
epoch it is fenced, so it can neither commit nor abort that transaction.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from oncelog.broker.txn.metadata import EXHAUSTED_EPOCH, TV_2, TransactionMetadata, TxnState
from oncelog.broker.txn.state_log import from_log_value, log_value_version, to_log_value
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.internal.transaction_log import decode_txn_log_value, encode_txn_log_value
from oncelog.protocol.records import iter_batches

from broker.helpers import create_topic_body
from broker.txn.test_transactions import READ_COMMITTED, TXN, _add, _fetch, _init_ok, _produce_txn, _values


async def _end_v5(client, pid: int, epoch: int, commit: bool) -> tuple[int, int, int]:
    body = {"transactional_id": TXN, "producer_id": pid, "producer_epoch": epoch, "committed": commit}
    response = await client.request(ApiKey.END_TXN, 5, body)
    return response.error_code, response.producer_id, response.producer_epoch


async def _describe(client):
    response = await client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [TXN]})
    return response.transaction_states[0]


async def _control_batches(client, topic: str) -> list[tuple[int, int, int]]:
    """(offset, producer id, epoch) of each marker in partition 0."""
    records = (await _fetch(client, topic, 0, 0)).records
    return [(h.base_offset, h.producer_id, h.producer_epoch) for h, _ in iter_batches(records) if h.is_control]


async def test_commit_bumps_the_epoch_and_the_markers_carry_it(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("bump"))
    pid, epoch = await _init_ok(client)
    await _add(client, pid, epoch, [("bump", 0)])
    await _produce_txn(client, "bump", 0, [b"a"], pid, epoch, 0)
    assert await _end_v5(client, pid, epoch, commit=True) == (ErrorCode.NONE, pid, epoch + 1)
    assert await _control_batches(client, "bump") == [(1, pid, epoch + 1)]
    described = await _describe(client)
    assert (described.transaction_state, described.producer_epoch) == ("CompleteCommit", epoch + 1)

    # The old epoch is fenced everywhere; the new one starts its sequences at 0.
    stale = await _add(client, pid, epoch, [("bump", 0)])
    assert stale == {("bump", 0): ErrorCode.PRODUCER_FENCED}
    assert await _add(client, pid, epoch + 1, [("bump", 0)]) == {("bump", 0): ErrorCode.NONE}
    assert (await _produce_txn(client, "bump", 0, [b"b"], pid, epoch + 1, 0)).error_code == ErrorCode.NONE
    assert await _end_v5(client, pid, epoch + 1, commit=False) == (ErrorCode.NONE, pid, epoch + 2)
    done = await _fetch(client, "bump", 0, READ_COMMITTED)
    assert done.last_stable_offset == 4
    assert [(a.producer_id, a.first_offset) for a in done.aborted_transactions] == [(pid, 2)]
    assert await _control_batches(client, "bump") == [(1, pid, epoch + 1), (3, pid, epoch + 2)]


async def test_delayed_end_txn_cannot_end_the_next_transaction(client) -> None:
    """KAFKA-17754 with EndTxn v5: the replay is a retry while idle and fenced once the next transaction began."""
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("k17754"))
    pid, epoch = await _init_ok(client)
    await _add(client, pid, epoch, [("k17754", 0)])
    await _produce_txn(client, "k17754", 0, [b"first"], pid, epoch, 0)
    assert await _end_v5(client, pid, epoch, commit=True) == (ErrorCode.NONE, pid, epoch + 1)

    # A copy arriving before the next transaction: answered as the retry it may be, with the new epoch.
    assert await _end_v5(client, pid, epoch, commit=True) == (ErrorCode.NONE, pid, epoch + 1)
    assert (await _end_v5(client, pid, epoch, commit=False))[0] == ErrorCode.INVALID_TXN_STATE
    # The current epoch on a completed transaction is not a retry of anything: fenced, as in Kafka.
    assert (await _end_v5(client, pid, epoch + 1, commit=True))[0] == ErrorCode.PRODUCER_FENCED
    assert await _control_batches(client, "k17754") == [(1, pid, epoch + 1)]

    # The producer begins its next transaction; copies of the old EndTxn (either decision) now arrive.
    await _add(client, pid, epoch + 1, [("k17754", 0)])
    await _produce_txn(client, "k17754", 0, [b"second"], pid, epoch + 1, 0)
    for commit in (True, False):
        assert (await _end_v5(client, pid, epoch, commit=commit))[0] == ErrorCode.PRODUCER_FENCED
    described = await _describe(client)
    assert (described.transaction_state, described.producer_epoch) == ("Ongoing", epoch + 1)
    open_read = await _fetch(client, "k17754", 0, READ_COMMITTED)
    assert (open_read.last_stable_offset, _values(open_read.records)) == (2, [b"first"])
    assert await _control_batches(client, "k17754") == [(1, pid, epoch + 1)]

    # The transaction ends only by its own EndTxn.
    assert await _end_v5(client, pid, epoch + 1, commit=True) == (ErrorCode.NONE, pid, epoch + 2)
    assert _values((await _fetch(client, "k17754", 0, READ_COMMITTED)).records) == [b"first", b"second"]


async def test_epoch_overflow_moves_to_a_new_producer_id(broker, client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("ovf"))
    pid, _ = await _init_ok(client)
    # Reaching the last epoch by 32,766 real transactions would take minutes; start from the coordinator's state
    # just before it (the partition learns the high epoch from the first batch, as after many bumps).
    coordinator = broker.node.transactions
    coordinator._transactions[TXN] = dataclasses.replace(coordinator.get(TXN), producer_epoch=EXHAUSTED_EPOCH)
    await _add(client, pid, EXHAUSTED_EPOCH, [("ovf", 0)])
    await _produce_txn(client, "ovf", 0, [b"last"], pid, EXHAUSTED_EPOCH, 0)

    error, new_pid, new_epoch = await _end_v5(client, pid, EXHAUSTED_EPOCH, commit=True)
    assert (error, new_epoch) == (ErrorCode.NONE, 0) and new_pid != pid
    # The marker closes the old producer's transaction with the one epoch left (Short.MAX_VALUE).
    assert await _control_batches(client, "ovf") == [(1, pid, EXHAUSTED_EPOCH + 1)]
    # A retry from the old producer id is recognised and answered with the new one.
    assert await _end_v5(client, pid, EXHAUSTED_EPOCH, commit=True) == (ErrorCode.NONE, new_pid, 0)
    await _add(client, new_pid, 0, [("ovf", 0)])
    assert (await _produce_txn(client, "ovf", 0, [b"next"], new_pid, 0, 0)).error_code == ErrorCode.NONE
    assert await _end_v5(client, new_pid, 0, commit=True) == (ErrorCode.NONE, new_pid, 1)
    assert _values((await _fetch(client, "ovf", 0, READ_COMMITTED)).records) == [b"last", b"next"]


async def test_bumped_state_survives_a_restart(start_broker, tmp_path: Path) -> None:
    """What recognises a retry (the transaction version) is persisted in value v1 of ``__transaction_state``."""
    data = tmp_path / "restart"
    broker = await start_broker(data)
    client = await broker.connect()
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("rs"))
    pid, epoch = await _init_ok(client)
    await _add(client, pid, epoch, [("rs", 0)])
    await _produce_txn(client, "rs", 0, [b"a"], pid, epoch, 0)
    assert await _end_v5(client, pid, epoch, commit=True) == (ErrorCode.NONE, pid, epoch + 1)
    await broker.stop()

    client = await (await start_broker(data)).connect()
    assert await _end_v5(client, pid, epoch, commit=True) == (ErrorCode.NONE, pid, epoch + 1)
    await _add(client, pid, epoch + 1, [("rs", 0)])
    assert (await _end_v5(client, pid, epoch, commit=False))[0] == ErrorCode.PRODUCER_FENCED


def test_prepared_overflow_round_trips_through_value_v1() -> None:
    """A transaction prepared with an overflowing bump keeps its next producer id across a restart."""
    prepared = TransactionMetadata(
        TXN,
        7,
        EXHAUSTED_EPOCH + 1,
        60000,
        TxnState.PREPARE_COMMIT,
        frozenset({("t", 0), ("t", 3)}),
        5,
        9,
        last_producer_epoch=EXHAUSTED_EPOCH,
        client_transaction_version=TV_2,
        next_producer_id=8,
    )
    assert log_value_version(prepared) == 1
    encoded = encode_txn_log_value(to_log_value(prepared), version=log_value_version(prepared))
    decoded = decode_txn_log_value(encoded)
    assert decoded is not None
    # lastProducerEpoch is memory-only, as in Kafka.
    assert from_log_value(TXN, decoded) == dataclasses.replace(prepared, last_producer_epoch=-1)
    # Transactions ended by EndTxn v0-4 keep writing value v0, byte-compatible with Kafka before TV2.
    assert log_value_version(dataclasses.replace(prepared, client_transaction_version=0, next_producer_id=-1)) == 0
