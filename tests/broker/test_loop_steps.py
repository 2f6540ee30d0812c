"""No single step of the event loop handles megabytes or thousands of connections at once: large sends and large
frames are moved a slice at a time, and the periodic looks over every connection let other tasks run, so one hostile
client's large request or a crowd of idle connections cannot hold up everyone else's requests (issue 23)."""

from __future__ import annotations

import threading

import trio
from oncelog.broker import server
from oncelog.broker.etcd.client import EtcdClient
from oncelog.broker.etcd.connect import parse_etcd_connect
from oncelog.broker.etcd.layout import BrokerRegistration, Layout
from oncelog.broker.replication.fetcher_identity import fetcher_client_id
from oncelog.broker.request_budget import RequestBudget
from oncelog.broker.server import LARGE_RECEIVE_CHUNK, FrameReader
from oncelog.broker.socket_io import SEND_SLICE_BYTES, NonBlockingSocket
from oncelog.protocol import ApiKey, ErrorCode, decode_response, encode_request


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


def _fetch_of_many_partitions(replica_id: int, partitions: int) -> dict:
    """A Fetch v12 of ``partitions`` partitions of a topic that does not exist (33 bytes each: 1,000 are 33 KB)."""
    listing = {
        "partition": 0,
        "current_leader_epoch": -1,
        "fetch_offset": 0,
        "last_fetched_epoch": -1,
        "log_start_offset": -1,
        "partition_max_bytes": 1024,
    }
    return {
        "replica_id": replica_id,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1024 * 1024,
        "isolation_level": 0,
        "session_id": 0,
        "session_epoch": -1,
        "topics": [{"topic": "absent", "partitions": [{**listing, "partition": p} for p in range(partitions)]}],
        "forgotten_topics_data": [],
        "rack_id": "",
    }


async def test_a_registered_followers_large_fetch_is_not_queued_behind_the_ration(start_broker, etcd, request) -> None:
    """While the decode ration is held (by the test, as a hostile client's large decode holds it), a Fetch of 1,500
    partitions (50 KB) from a registered follower's fetcher (its client id names broker 2 and the lease broker 2 is
    registered under, on the inter-broker listener) is decoded and answered; the same Fetch claiming replica_id 2
    with Kafka's fetcher client id, or with a lease not broker 2's, waits for its turn."""
    root = f"{etcd.endpoint}/{request.node.name}"
    broker = await start_broker(properties={"etcd.connect": root, "node.id": "1"})
    member = broker.node.member
    listener = broker.node.inter_broker_listener
    # The node's own fetchers name its registration, which its check accepts.
    assert broker.node.server_context.is_replica_fetcher(broker.node.replica_fetchers.client_id(2), listener)
    layout = Layout(parse_etcd_connect(root))
    async with EtcdClient([etcd.url]) as etcd_client:
        lease = await etcd_client.grant_lease(30)
        registration = BrokerRegistration(2, {listener: ("127.0.0.1", 9)})
        await etcd_client.put(layout.broker(2), registration.to_json(), lease=lease.id)
        with trio.fail_after(10):
            while member.image.broker_leases.get(2) != lease.id:
                await trio.sleep(0.01)
        claims = {
            "kafka form": fetcher_client_id(2, 1, 0),
            "not the lease": fetcher_client_id(2, 1, lease.id + 1),
            "registered": fetcher_client_id(2, 1, lease.id),
        }
        request_bytes = encode_request(ApiKey.FETCH, 12, 1, "x", _fetch_of_many_partitions(2, 1500))
        assert len(request_bytes) > server.THREAD_DECODE_BYTES
        connections = {claim: await broker.connect() for claim in claims}
        limiter = server._decode_limiter()
        hostile = object()
        await limiter.acquire_on_behalf_of(hostile)
        try:
            for claim, client_id in claims.items():
                data = encode_request(ApiKey.FETCH, 12, 1, client_id, _fetch_of_many_partitions(2, 1500))
                await connections[claim].send_raw(len(data).to_bytes(4, "big") + data)
            with trio.fail_after(10):  # not a speed bound: a rationed request is never answered while it is held
                answer = decode_response(ApiKey.FETCH, 12, await connections["registered"].read_frame())
                while limiter.statistics().tasks_waiting < 2:  # the other two wait for their turn
                    await trio.sleep(0.01)
            assert [len(t.partitions) for t in answer.responses] == [1500]
            assert {p.error_code for p in answer.responses[0].partitions} == {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        finally:
            limiter.release_on_behalf_of(hostile)
        with trio.fail_after(30):
            for claim in ("kafka form", "not the lease"):
                assert await connections[claim].read_frame() is not None  # answered once their turn came
        await etcd_client.revoke_lease(lease.id)
