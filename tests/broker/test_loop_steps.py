"""No single step of the event loop handles megabytes or thousands of connections at once: large sends and large
frames are moved a slice at a time, and the periodic looks over every connection let other tasks run, so one hostile
client's large request or a crowd of idle connections cannot hold up everyone else's requests (issue 23)."""

from __future__ import annotations

import threading

import trio
from oncelog.broker import server
from oncelog.broker.request_budget import RequestBudget
from oncelog.broker.server import LARGE_RECEIVE_CHUNK, FrameReader
from oncelog.broker.socket_io import SEND_SLICE_BYTES, NonBlockingSocket
from oncelog.protocol import ApiKey


class _Counter:
    """A task that counts how often it got to run while another task worked."""

    def __init__(self) -> None:
        self.runs = 0

    async def run(self) -> None:
        while True:
            await trio.lowlevel.checkpoint()
            self.runs += 1


class _EagerSocket:
    """A socket whose kernel buffer always has room: every ``send`` takes all it is given."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def send(self, data: memoryview) -> int:
        self.calls.append(len(data))
        return len(data)

    def fileno(self) -> int:
        return 3


class _ReadyStream:
    """A stream whose bytes have all arrived: every receive returns at once, without a checkpoint."""

    def __init__(self, data: bytes) -> None:
        self._data = memoryview(data)

    async def receive_some(self, max_bytes: int) -> bytes:
        chunk, self._data = self._data[:max_bytes], self._data[max_bytes:]
        return bytes(chunk)


async def _while_counting(work) -> int:
    counter = _Counter()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(counter.run)
        await trio.lowlevel.checkpoint()
        before = counter.runs
        await work()
        nursery.cancel_scope.cancel()
    return counter.runs - before


async def test_a_large_send_lets_other_tasks_run_between_slices() -> None:
    sock = object.__new__(NonBlockingSocket)
    eager = _EagerSocket()
    sock._sock = eager  # type: ignore[assignment]
    sock.waits = 0
    size = 16 * SEND_SLICE_BYTES
    runs = await _while_counting(lambda: sock.send_all(bytes(size)))
    assert sum(eager.calls) == size
    assert max(eager.calls) == SEND_SLICE_BYTES
    assert runs >= 8  # about once between every two slices


async def test_a_large_frame_already_received_is_copied_a_chunk_at_a_time() -> None:
    size = 8 * 1024 * 1024
    frame = size.to_bytes(4, "big") + bytes(size)
    reader = FrameReader(_ReadyStream(frame), max_size=size, budget=RequestBudget(size))  # type: ignore[arg-type]
    got: list[object] = []

    async def read() -> None:
        got.append(await reader.next_frame())

    runs = await _while_counting(read)
    assert len(got[0]) == size  # type: ignore[arg-type]
    assert runs >= size // LARGE_RECEIVE_CHUNK - 2


async def test_the_look_for_departed_clients_lets_other_tasks_run(monkeypatch) -> None:
    counter = _Counter()
    seen: list[int] = []  # the counter's value at each look: the same value all along if the look never yields

    class Waiting:
        def close_if_departed(self) -> None:
            seen.append(counter.runs)

    connections = {Waiting() for _ in range(20 * server.CONNECTIONS_PER_CHECKPOINT)}
    monkeypatch.setattr(server, "DEPARTED_CHECK_S", 0)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(counter.run)
        nursery.start_soon(server._close_departed, connections)
        while len(seen) < len(connections):
            await trio.sleep(0.001)
        nursery.cancel_scope.cancel()
    first_look = seen[: len(connections)]
    assert len(set(first_look)) >= 10


async def test_a_large_request_is_decoded_and_answered_off_the_event_loop(client, monkeypatch) -> None:
    """A Metadata request of 20,000 names (over 160 KB) is decoded, and its 20,000-topic answer encoded, in the
    worker thread; a small one on the event loop."""
    on_loop: dict[tuple[str, int], list[bool]] = {}  # (step, topics) -> per Metadata: on the event loop's thread?
    real_decode, real_encode = server.decode_request, server.encode_response

    def seen(step: str, topics: int) -> None:
        on_loop.setdefault((step, topics), []).append(threading.current_thread() is threading.main_thread())

    def decode(header, *args, **kwargs):
        body = real_decode(header, *args, **kwargs)
        if header.api_key == ApiKey.METADATA:
            seen("decode", len(body.topics or ()))
        return body

    def encode(header, result, *args, **kwargs):
        if header.api_key == ApiKey.METADATA:
            seen("encode", len(result["topics"]))
        return real_encode(header, result, *args, **kwargs)

    monkeypatch.setattr(server, "decode_request", decode)
    monkeypatch.setattr(server, "encode_response", encode)
    names = [{"name": f"no-such-topic-{i}"} for i in range(20_000)]
    answer = await client.request(ApiKey.METADATA, 4, {"topics": names, "allow_auto_topic_creation": False})
    assert len(answer.topics) == 20_000
    await client.request(ApiKey.METADATA, 4, {"topics": [], "allow_auto_topic_creation": False})
    assert on_loop[("decode", 20_000)] == on_loop[("encode", 20_000)] == [False]
    assert set(on_loop[("decode", 0)]) == set(on_loop[("encode", 0)]) == {True}
