"""Parked consumer fetches are woken once their min_bytes may be visible, not by every produce (#23's soak: hundreds
of parked fetches, each woken and looking at its partitions at every produce), and never miss data that becomes
visible: bytes gathered over several produces, a transaction's records when its commit makes them stable."""

from __future__ import annotations

import trio
from oncelog.broker.apis import fetch
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import iter_records

from .helpers import batch, create_topic_body, fetch_body, produce_body
from .txn.test_transactions import READ_COMMITTED, _add, _end, _init_ok, _produce_txn, _values


async def _produce(client, topic: str, value: bytes) -> None:
    response = await client.request(ApiKey.PRODUCE, 7, produce_body(topic, 0, batch([value])))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE


async def test_a_parked_fetch_looks_again_only_once_its_min_bytes_may_be_there(broker, client, monkeypatch) -> None:
    """A fetch parked for 20 batches' bytes while 30 batches are produced one by one: answered with at least 20 of
    them, after looking at its partition twice (when it parks, when enough arrived), not once per produce."""
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("wait"))
    one_batch = len(batch([b"x" * 100]))
    looks = 0
    measure = fetch._visible_bytes

    def counted(*args):
        nonlocal looks
        looks += 1
        return measure(*args)

    monkeypatch.setattr(fetch, "_visible_bytes", counted)
    producer = await broker.connect()
    result = {}

    async def consume() -> None:
        body = fetch_body("wait", 0, 0, max_wait_ms=20_000, min_bytes=20 * one_batch)
        result["response"] = await client.request(ApiKey.FETCH, 11, body)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        await trio.sleep(0.2)
        for _ in range(30):
            await _produce(producer, "wait", b"x" * 100)
    records = list(iter_records(result["response"].responses[0].partitions[0].records))
    assert len(records) >= 20
    assert looks <= 3, looks


async def test_a_parked_read_committed_fetch_is_answered_when_the_transaction_commits(broker, client) -> None:
    """read_committed, parked while a transaction's records are appended (the high watermark moves, the last
    stable offset does not): answered with them as soon as the commit makes them stable."""
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("txw"))
    pid, epoch = await _init_ok(client)
    assert await _add(client, pid, epoch, [("txw", 0)]) == {("txw", 0): 0}
    producer = await broker.connect()
    result = {}

    async def consume() -> None:
        started = trio.current_time()
        body = fetch_body("txw", 0, 0, max_wait_ms=20_000, isolation_level=READ_COMMITTED)
        result["partition"] = (await client.request(ApiKey.FETCH, 11, body)).responses[0].partitions[0]
        result["waited"] = trio.current_time() - started

    async with trio.open_nursery() as nursery:
        nursery.start_soon(consume)
        await trio.sleep(0.2)
        for seq in range(3):
            assert (await _produce_txn(producer, "txw", 0, [b"v%d" % seq], pid, epoch, seq)).error_code == 0
        await trio.sleep(0.3)
        assert "partition" not in result
        assert await _end(producer, pid, epoch, commit=True) == ErrorCode.NONE
    assert _values(result["partition"].records) == [b"v0", b"v1", b"v2"]
    assert result["waited"] < 10
