"""Idempotent producer through the wire: dedupe, sequence and epoch errors, ids never reused after restart."""

from __future__ import annotations

from oncelog.protocol import ApiKey, ErrorCode

from broker.helpers import batch, create_topic_body, list_offsets_body, produce_body


async def _init_pid(client) -> tuple[int, int]:
    response = await client.request(
        ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60000}
    )
    assert response.error_code == ErrorCode.NONE
    return response.producer_id, response.producer_epoch


async def _send(client, values, pid, epoch, seq):
    records = batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    response = await client.request(ApiKey.PRODUCE, 7, produce_body("idem", 0, records))
    return response.responses[0].partition_responses[0]


async def _latest(client) -> int:
    response = await client.request(ApiKey.LIST_OFFSETS, 3, list_offsets_body("idem", 0, -1))
    return response.topics[0].partitions[0].offset


async def test_retried_batch_gets_its_original_offsets(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("idem"))
    pid, epoch = await _init_pid(client)
    first = await _send(client, [b"a", b"b"], pid, epoch, 0)
    second = await _send(client, [b"c"], pid, epoch, 2)
    again = await _send(client, [b"a", b"b"], pid, epoch, 0)
    assert (first.base_offset, second.base_offset) == (0, 2)
    assert (again.error_code, again.base_offset) == (ErrorCode.NONE, 0)
    assert await _latest(client) == 3


async def test_sequence_gap_and_stale_epoch(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("idem"))
    pid, epoch = await _init_pid(client)
    assert (await _send(client, [b"a"], pid, epoch, 0)).error_code == ErrorCode.NONE
    gap = await _send(client, [b"b"], pid, epoch, 5)
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert (await _send(client, [b"b"], pid, epoch + 1, 0)).error_code == ErrorCode.NONE
    stale = await _send(client, [b"c"], pid, epoch, 1)
    assert stale.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    assert await _latest(client) == 2


async def test_producer_ids_are_unique_across_restarts(start_broker, tmp_path) -> None:
    data = tmp_path / "pid-data"
    broker = await start_broker(data)
    client = await broker.connect()
    before = {(await _init_pid(client))[0] for _ in range(3)}
    await broker.stop()
    broker = await start_broker(data)
    client = await broker.connect()
    after = {(await _init_pid(client))[0] for _ in range(3)}
    assert len(before) == 3 and len(after) == 3
    assert max(before) < min(after)
