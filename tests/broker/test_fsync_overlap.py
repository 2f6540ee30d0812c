"""fsync-before-ack mode through the wire: the fsyncs of different partitions that requests wait for run in parallel.

Every fsync is held in the helper for HELD_FSYNC_MS, so what started before the first one finished is visible. The
clock is frozen (``mock_clock``) so the flusher's timer for unwaited appends cannot start them instead.
"""

from __future__ import annotations

import trio
from oncelog.protocol import ApiKey, ErrorCode, decode_response

from broker.helpers import batch, create_topic_body, produce_body
from broker.txn.test_transactions import _add, _end, _init_ok, _produce_txn

#: How long the fsync helper holds every fsync, so that what started before the first one finished is visible.
HELD_FSYNC_MS = 500
PARTITIONS = 3


def _hold_fsyncs(broker) -> list[tuple[str, int, int]]:
    """From now on every fsync is held HELD_FSYNC_MS; returns the record of them: (topic, partition, fsyncs
    finished before it started)."""
    flusher = broker.node.flusher
    submit = flusher._syncer.submit
    started: list[tuple[str, int, int]] = []

    def held(item, fds, *, full: bool, delay_ms: int = 0) -> None:
        started.append((item[0].topic, item[0].partition, flusher.fsyncs))
        submit(item, fds, full=full, delay_ms=HELD_FSYNC_MS)

    flusher._syncer.submit = held
    return started


async def test_pipelined_produces_to_different_partitions_fsync_in_parallel(broker, client, mock_clock) -> None:
    """Each request's fsync starts once it is read, not when its answer reaches the front of the connection's
    queue: all three are under way before the first answer."""
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("t", PARTITIONS))
    started = _hold_fsyncs(broker)
    correlation_ids = [
        await client.send(ApiKey.PRODUCE, 7, produce_body("t", partition, batch([b"v%d" % partition])))
        for partition in range(PARTITIONS)
    ]
    with trio.fail_after(10):
        first = await client.read_frame()
    assert sorted(partition for _, partition, _ in started) == list(range(PARTITIONS))
    answers = [first] + [await client.read_frame() for _ in range(PARTITIONS - 1)]
    for partition, (correlation_id, frame) in enumerate(zip(correlation_ids, answers, strict=True)):
        assert int.from_bytes(frame[:4], "big") == correlation_id
        response = decode_response(ApiKey.PRODUCE, 7, frame)
        answer = response.responses[0].partition_responses[0]
        assert (answer.index, answer.error_code, answer.base_offset) == (partition, ErrorCode.NONE, 0)
    assert len(started) == PARTITIONS


async def test_markers_of_a_transaction_fsync_in_parallel(broker, client, mock_clock) -> None:
    """EndTxn starts the fsync of every partition's marker before any of them finishes."""
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("t", PARTITIONS))
    pid, epoch = await _init_ok(client)
    partitions = [("t", p) for p in range(PARTITIONS)]
    assert set((await _add(client, pid, epoch, partitions)).values()) == {ErrorCode.NONE}
    for _, partition in partitions:
        assert (await _produce_txn(client, "t", partition, [b"v"], pid, epoch, 0)).error_code == ErrorCode.NONE
    started = _hold_fsyncs(broker)
    with trio.fail_after(10):
        assert await _end(client, pid, epoch, commit=True) == ErrorCode.NONE
    markers = [(partition, finished) for topic, partition, finished in started if topic == "t"]
    assert sorted(partition for partition, _ in markers) == list(range(PARTITIONS))
    assert len({finished for _, finished in markers}) == 1  # none had finished when the last one started
