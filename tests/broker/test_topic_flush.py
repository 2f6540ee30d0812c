"""Per-topic flush.messages / flush.ms: each partition's flush mode follows its topic's effective settings, at
creation, after a live change (both ways, with requests already waiting) and after a restart.

Every fsync the flusher starts is recorded by an ``FsyncGate``; while the gate is closed the fsyncs are held (not
handed to the fsync helper), so what waits for an fsync visibly cannot finish before the test opens it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator, Callable

import pytest
import trio
from oncelog.broker.flusher import LogFlusher
from oncelog.protocol import ApiKey, ErrorCode, decode_response
from oncelog.storage.config import LONG_MAX

from broker.apis.test_alter_configs import DELETE, OK, SET, _alter, _create
from broker.conftest import RunningBroker, WireClient
from broker.group.test_groups import commit
from broker.helpers import batch, produce_body

PRODUCE_VERSION = 7
#: A broker in Kafka's page-cache mode (no topic overrides: nothing waits for an fsync).
PAGE_CACHE_BROKER = {"log_flush_interval_messages": str(LONG_MAX)}


class FsyncGate:
    """Records the fsyncs a flusher starts as (topic, partition, end offset); holds them while closed."""

    def __init__(self, flusher: LogFlusher) -> None:
        self._submit = flusher._syncer.submit
        self._held: list[tuple] = []
        self.closed = False
        self.started: list[tuple[str, int, int]] = []
        flusher._syncer.submit = self._on_submit

    def _on_submit(self, item, fds, *, full: bool, delay_ms: int = 0) -> None:
        self.started.append((item[0].topic, item[0].partition, item[1]))
        if self.closed:
            self._held.append((item, fds, full, delay_ms))
        else:
            self._submit(item, fds, full=full, delay_ms=delay_ms)

    def close(self) -> None:
        self.closed = True

    def open(self) -> None:
        """Let the held fsyncs and every later one through."""
        self.closed = False
        held, self._held = self._held, []
        for item, fds, full, delay_ms in held:
            self._submit(item, fds, full=full, delay_ms=delay_ms)

    def topics(self) -> set[str]:
        return {topic for topic, _, _ in self.started}

    def of(self, topic: str) -> list[int]:
        """End offsets of the fsyncs started for ``topic``'s partition 0."""
        return [end for name, partition, end in self.started if (name, partition) == (topic, 0)]


@pytest.fixture
async def gated(start_broker: Callable) -> AsyncIterator[Callable]:
    """``await gated(**broker_properties)``: a started broker and its (open) FsyncGate; every gate is opened at
    the end so no held descriptor outlives the test."""
    gates: list[FsyncGate] = []

    async def start(**properties: str) -> tuple[RunningBroker, FsyncGate]:
        broker = await start_broker(**properties)
        gates.append(FsyncGate(broker.node.flusher))
        return broker, gates[-1]

    yield start
    for gate in gates:
        with contextlib.suppress(RuntimeError):  # a broker stopped with fsyncs held: submit closed their descriptors
            gate.open()


async def _until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    with trio.fail_after(seconds):
        while not condition():
            await trio.sleep(0.002)


async def _produce(client: WireClient, topic: str, value: bytes = b"v", count: int = 1):
    """One acks=1 Produce, answered: its partition response."""
    body = produce_body(topic, 0, batch([value] * count), acks=1)
    with trio.fail_after(10):
        response = await client.request(ApiKey.PRODUCE, PRODUCE_VERSION, body)
    answer = response.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NONE
    return answer


async def _no_answer_yet(client: WireClient) -> None:
    """Nothing arrives on ``client`` for a while (its request waits for an fsync the gate holds)."""
    with trio.move_on_after(0.2):
        frame = await client.read_frame()
        raise AssertionError(f"answered before the fsync it waits for: {frame!r}")


async def _answer(client: WireClient):
    with trio.fail_after(10):
        frame = await client.read_frame()
    assert frame is not None
    answer = decode_response(ApiKey.PRODUCE, PRODUCE_VERSION, frame).responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NONE
    return answer


async def test_page_cache_broker_topic_with_flush_messages_1_waits_for_its_fsync(gated) -> None:
    broker, gate = await gated(**PAGE_CACHE_BROKER)
    durable_client, fast_client = await broker.connect(), await broker.connect()
    await _create(durable_client, "durable", flush_messages="1")
    await _create(durable_client, "fast")
    durable = broker.node.logs.get("durable", 0)
    assert durable.config.fsync_before_ack and not broker.node.logs.get("fast", 0).config.fsync_before_ack
    gate.close()
    fsyncs = broker.node.flusher.fsyncs

    await durable_client.send(ApiKey.PRODUCE, PRODUCE_VERSION, produce_body("durable", 0, batch([b"a", b"b"]), acks=1))
    await _until(lambda: gate.of("durable") == [2])  # its fsync started, and is held
    await _no_answer_yet(durable_client)
    assert durable.high_watermark == 0  # consumers see only durable data

    # Meanwhile another topic on the same broker answers without any fsync.
    assert (await _produce(fast_client, "fast")).base_offset == 0
    assert broker.node.logs.get("fast", 0).high_watermark == 1
    assert gate.of("fast") == [] and broker.node.flusher.fsyncs == fsyncs

    gate.open()
    assert (await _answer(durable_client)).base_offset == 0
    assert broker.node.flusher.fsyncs > fsyncs
    assert durable.durable_offset == durable.high_watermark == 2
    assert gate.of("fast") == []


async def test_fsync_broker_topic_with_flush_messages_n_answers_at_once_and_flushes_every_n(gated) -> None:
    broker, gate = await gated()  # the default: fsync before acknowledging
    client = await broker.connect()
    await _create(client, "batched", flush_messages="3")
    batched = broker.node.logs.get("batched", 0)
    gate.close()  # anything that waited for an fsync would now never be answered
    for offset in range(2):
        assert (await _produce(client, "batched")).base_offset == offset
    assert batched.high_watermark == 2 and batched.durable_offset == 0
    await trio.sleep(0.05)  # long past the unwaited-append delay of fsync mode
    assert gate.of("batched") == []

    assert (await _produce(client, "batched")).base_offset == 2
    await _until(lambda: gate.of("batched") == [3])  # the third message crosses flush.messages
    gate.open()
    await _until(lambda: batched.durable_offset == 3)

    # The broker's default still applies to a topic without overrides.
    await _create(client, "default")
    gate.close()
    await client.send(ApiKey.PRODUCE, PRODUCE_VERSION, produce_body("default", 0, batch([b"x"]), acks=1))
    await _until(lambda: gate.of("default") == [1])
    await _no_answer_yet(client)
    gate.open()
    await _answer(client)


#: The timed topic's flush.ms: long enough that its Produce is answered well before it, on a loaded machine too.
FLUSH_MS = 1000


async def test_topic_flush_ms_flushes_that_long_after_the_last_fsync(gated) -> None:
    broker, gate = await gated(log_flush_scheduler_interval_ms="20")
    client = await broker.connect()
    await _create(client, "timed", flush_messages="1000000", flush_ms=str(FLUSH_MS))
    timed = broker.node.logs.get("timed", 0)
    started = time.monotonic()
    assert (await _produce(client, "timed")).base_offset == 0  # page cache: answered before any fsync
    assert gate.of("timed") == [] and timed.durable_offset == 0
    await _until(lambda: timed.durable_offset == 1)
    assert time.monotonic() - started >= FLUSH_MS / 1000
    assert gate.of("timed") == [1]


async def test_live_switch_to_page_cache_releases_waiting_requests_only_once_durable(gated) -> None:
    broker, gate = await gated()
    client, other = await broker.connect(), await broker.connect()
    await _create(other, "switch")
    switch = broker.node.logs.get("switch", 0)
    gate.close()
    # Two pipelined requests in fsync mode: the first one's fsync is held, the second needs another one after it.
    await client.send(ApiKey.PRODUCE, PRODUCE_VERSION, produce_body("switch", 0, batch([b"a"]), acks=1))
    await _until(lambda: gate.of("switch") == [1])
    await client.send(ApiKey.PRODUCE, PRODUCE_VERSION, produce_body("switch", 0, batch([b"b"]), acks=1))
    await _until(lambda: switch.log_end_offset == 2)

    assert await _alter(other, "switch", ("flush.messages", SET, "10000")) == OK
    assert not switch.config.fsync_before_ack
    assert switch.high_watermark == 2  # page cache: everything appended is visible
    assert (await _produce(other, "switch")).base_offset == 2  # a new request no longer waits
    await _no_answer_yet(client)  # the two accepted in fsync mode still wait for durability

    gate.open()
    assert (await _answer(client)).base_offset == 0
    assert switch.durable_offset >= 1
    assert (await _answer(client)).base_offset == 1
    assert switch.durable_offset >= 2


async def test_live_switch_to_fsync_mode_syncs_the_unflushed_data_and_keeps_the_high_watermark(gated) -> None:
    broker, gate = await gated(**PAGE_CACHE_BROKER)
    client, other = await broker.connect(), await broker.connect()
    await _create(other, "switch")
    switch = broker.node.logs.get("switch", 0)
    gate.close()
    assert (await _produce(client, "switch", count=3)).base_offset == 0
    assert switch.high_watermark == 3 and switch.durable_offset == 0

    assert await _alter(other, "switch", ("flush.messages", SET, "1")) == OK
    assert switch.config.fsync_before_ack
    assert switch.high_watermark == 3  # never back
    await _until(lambda: gate.of("switch") == [3])  # the unflushed data is synced without anyone asking

    await client.send(ApiKey.PRODUCE, PRODUCE_VERSION, produce_body("switch", 0, batch([b"d"]), acks=1))
    await _no_answer_yet(client)
    assert switch.high_watermark == 3
    gate.open()
    assert (await _answer(client)).base_offset == 3
    assert switch.durable_offset == switch.high_watermark == switch.log_end_offset == 4

    # And back to the broker's page-cache default by deleting the override.
    assert await _alter(other, "switch", ("flush.messages", DELETE, None)) == OK
    gate.close()
    assert (await _produce(client, "switch")).base_offset == 4
    assert switch.high_watermark == 5 and gate.of("switch") == [3, 4]
    gate.open()


async def test_flush_mode_survives_a_restart(gated, tmp_path) -> None:
    broker, _ = await gated(**PAGE_CACHE_BROKER)
    client = await broker.connect()
    await _create(client, "created-durable", flush_messages="1")
    await _create(client, "altered-durable")
    assert await _alter(client, "altered-durable", ("flush.messages", SET, "1")) == OK
    await _create(client, "page-cache")
    await broker.stop()

    broker, gate = await gated(**PAGE_CACHE_BROKER)
    client = await broker.connect()
    gate.close()
    assert (await _produce(client, "page-cache")).base_offset == 0
    for topic in ("created-durable", "altered-durable"):
        await client.send(ApiKey.PRODUCE, PRODUCE_VERSION, produce_body(topic, 0, batch([b"v"]), acks=1))
        await _until(lambda topic=topic: gate.of(topic) == [1])
        await _no_answer_yet(client)
        gate.open()
        await _answer(client)
        gate.close()
    assert gate.of("page-cache") == []


async def test_consumer_offsets_follow_the_broker_default_unless_overridden(gated, nursery) -> None:
    broker, gate = await gated(**PAGE_CACHE_BROKER)
    client = await broker.connect()
    await _create(client, "t")
    await broker.node.ensure_offsets_topic()
    gate.close()
    with trio.fail_after(10):
        assert await commit(client, {("t", 0): (1, "")}) == {("t", 0): ErrorCode.NONE}
    assert "__consumer_offsets" not in gate.topics()  # the broker's page-cache default: answered unsynced

    assert await _alter(client, "__consumer_offsets", ("flush.messages", SET, "1")) == OK
    committed = trio.Event()

    async def commit_again() -> None:
        assert await commit(client, {("t", 0): (2, "")}) == {("t", 0): ErrorCode.NONE}
        committed.set()

    nursery.start_soon(commit_again)
    await _until(lambda: "__consumer_offsets" in gate.topics())
    await trio.sleep(0.2)
    assert not committed.is_set()  # answered only once its record is durable
    gate.open()
    with trio.fail_after(10):
        await committed.wait()


@pytest.mark.parametrize(
    ("broker_properties", "overrides", "fsync_before_ack"),
    [
        ({}, {}, True),
        ({}, {"flush.messages": "2"}, False),
        ({}, {"flush.ms": "1000"}, False),
        ({"log_flush_interval_ms": "1000"}, {}, False),
        ({"log_flush_interval_ms": "1000"}, {"flush.ms": str(LONG_MAX)}, True),  # Long.MAX_VALUE: unset
        (PAGE_CACHE_BROKER, {}, False),
        (PAGE_CACHE_BROKER, {"flush.messages": "1"}, True),
    ],
)
async def test_effective_mode_is_the_override_else_the_broker_default(
    start_broker, broker_properties, overrides, fsync_before_ack
) -> None:
    broker = await start_broker(**broker_properties)
    client = await broker.connect()
    await _create(client, "t", **{name.replace(".", "_"): value for name, value in overrides.items()})
    assert broker.node.logs.get("t", 0).config.fsync_before_ack is fsync_before_ack
