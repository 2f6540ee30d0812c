"""Protocol abuse around transaction ends: replayed and concurrent EndTxn v0-4 (KAFKA-17754) and writes to partitions
outside the transaction.

What we guarantee with EndTxn v0-4 (the request names only producer id and epoch, and the epoch does not change at
the end of a transaction): an EndTxn for a transaction that is already complete is answered from the
CompleteCommit/CompleteAbort state (NONE for the same decision, INVALID_TXN_STATE for the other) and writes nothing;
concurrent duplicates are serialised and produce one marker per partition; a duplicate answered before the next
transaction begins leaves that transaction untouched. A replay that is delivered only after the producer's next
AddPartitionsToTxn is indistinguishable from that transaction's own EndTxn and ends it, exactly as in Kafka with
transaction version 1; EndTxn v5 closes this (tests/broker/txn/test_txn_epoch_bump.py, docs/FAULTS.md).
"""

from __future__ import annotations

import trio
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import iter_batches

from broker.helpers import create_topic_body
from broker.txn.test_transactions import READ_COMMITTED, TXN, _add, _end, _fetch, _init_ok, _produce_txn, _values


async def _state(client) -> str:
    described = await client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [TXN]})
    return described.transaction_states[0].transaction_state


async def _markers(client, topic: str, partition: int) -> list[int]:
    """Offsets of the control batches in the partition."""
    records = (await _fetch(client, topic, partition, 0)).records
    return [header.base_offset for header, _ in iter_batches(records) if header.is_control]


async def test_duplicate_end_txn_is_answered_from_the_complete_state(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("dup", partitions=2))
    pid, epoch = await _init_ok(client)
    await _add(client, pid, epoch, [("dup", 0), ("dup", 1)])
    await _produce_txn(client, "dup", 0, [b"a"], pid, epoch, 0)
    await _produce_txn(client, "dup", 1, [b"b"], pid, epoch, 0)
    assert await _end(client, pid, epoch, commit=True) == ErrorCode.NONE
    assert await _state(client) == "CompleteCommit"
    before = [await _markers(client, "dup", p) for p in (0, 1)]
    assert before == [[1], [1]]

    # Replays of the finished commit, and an abort for it, write nothing and change nothing.
    for version in (0, 3):
        assert await _end(client, pid, epoch, commit=True, version=version) == ErrorCode.NONE
        assert await _end(client, pid, epoch, commit=False, version=version) == ErrorCode.INVALID_TXN_STATE
    assert [await _markers(client, "dup", p) for p in (0, 1)] == before
    assert await _state(client) == "CompleteCommit"

    # The next transaction is untouched by them: its records stay invisible until its own commit.
    await _add(client, pid, epoch, [("dup", 0)])
    await _produce_txn(client, "dup", 0, [b"c"], pid, epoch, 1)
    assert await _state(client) == "Ongoing"
    open_read = await _fetch(client, "dup", 0, READ_COMMITTED)
    assert (open_read.last_stable_offset, _values(open_read.records)) == (2, [b"a"])
    assert await _end(client, pid, epoch, commit=False) == ErrorCode.NONE
    done = await _fetch(client, "dup", 0, READ_COMMITTED)
    assert done.last_stable_offset == 4
    assert [(a.producer_id, a.first_offset) for a in done.aborted_transactions] == [(pid, 2)]
    assert await _markers(client, "dup", 0) == [1, 3]
    # And a late replay of the *first* commit now meets CompleteAbort: refused, nothing written.
    assert await _end(client, pid, epoch, commit=True) == ErrorCode.INVALID_TXN_STATE
    assert await _markers(client, "dup", 0) == [1, 3]


async def test_concurrent_end_txn_writes_one_marker(broker, client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("race", partitions=3))
    pid, epoch = await _init_ok(client)
    partitions = [("race", p) for p in range(3)]
    await _add(client, pid, epoch, partitions)
    for _, p in partitions:
        await _produce_txn(client, "race", p, [b"x%d" % p], pid, epoch, 0)
    others = [await broker.connect() for _ in range(4)]
    results: list[int] = []

    async def end(connection) -> None:
        results.append(await _end(connection, pid, epoch, commit=True))

    async with trio.open_nursery() as nursery:
        for connection in others:
            nursery.start_soon(end, connection)
    # The first to take the transaction's lock commits; the others see PrepareCommit (retriable) or CompleteCommit.
    assert ErrorCode.NONE in results
    assert set(results) <= {ErrorCode.NONE, ErrorCode.CONCURRENT_TRANSACTIONS}
    for _, p in partitions:
        assert await _markers(client, "race", p) == [1]
        assert _values((await _fetch(client, "race", p, READ_COMMITTED)).records) == [b"x%d" % p]


async def test_write_outside_the_transaction_never_holds_the_lso(client) -> None:
    """KIP-890 part 1: a transactional batch for a partition the transaction did not add is refused, and neither it
    nor the refusal leaves the partition's LSO stuck, before or after the transaction ends."""
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("lso", partitions=2))
    pid, epoch = await _init_ok(client)
    await _add(client, pid, epoch, [("lso", 0)])
    assert (await _produce_txn(client, "lso", 1, [b"stray"], pid, epoch, 0)).error_code == ErrorCode.INVALID_TXN_STATE
    assert (await _produce_txn(client, "lso", 0, [b"ok"], pid, epoch, 0)).error_code == ErrorCode.NONE
    stray = await _fetch(client, "lso", 1, READ_COMMITTED)
    assert (stray.high_watermark, stray.last_stable_offset) == (0, 0)
    assert await _end(client, pid, epoch, commit=True) == ErrorCode.NONE
    # After the end, the same stray write (no AddPartitions) is still refused; the LSO follows the log end.
    assert (await _produce_txn(client, "lso", 1, [b"late"], pid, epoch, 1)).error_code == ErrorCode.INVALID_TXN_STATE
    stray = await _fetch(client, "lso", 1, READ_COMMITTED)
    assert (stray.high_watermark, stray.last_stable_offset) == (0, 0)
    committed = await _fetch(client, "lso", 0, READ_COMMITTED)
    assert committed.last_stable_offset == committed.high_watermark == 2
    assert _values(committed.records) == [b"ok"]
