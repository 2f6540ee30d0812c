"""Hostile clients against a live broker: small, well-formed (or nearly) requests that once made the broker allocate
gigabytes, stall every client for seconds, or flood its log (#23). Each test replays one case and asserts the
bound docs/FAULTS.md states ("Hostile input: connections, decoding and fetch"): the broker's RSS, a bystander's
answer latency (generous: several seconds where the bug cost 15), and the answer (an error code or a clean close).

The broker runs with ``fetch.max.bytes`` at 2 MiB so that its cap shows on a small partition.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from oncelog.protocol import ApiKey, decode_response
from support.broker import BrokerProcess
from support.hostile import (
    FETCH_VERSION,
    LIST_OFFSETS_VERSION,
    Wire,
    batch_of,
    fetch_body,
    frame,
    header_bytes,
    metadata_frame,
    metadata_of_empty_names,
    open_fds,
    rss_mb,
)

FETCH_MAX_BYTES = 2 * 1024 * 1024
#: The longest a bystander's Metadata request may wait while a hostile client is served (it was 15 s).
BYSTANDER_MAX_S = 3.0
BIG_TOPIC = "big"
WIDE_TOPIC = "wide"
_SIZE = struct.Struct(">i")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    data = tmp_path_factory.mktemp("hostile") / "data"
    with BrokerProcess(data, settings={"fetch.max.bytes": FETCH_MAX_BYTES}) as proc:
        with Wire(proc.port) as wire:
            wire.create_topic(BIG_TOPIC, 1)
            wire.create_topic(WIDE_TOPIC, 200)
            # 3.2 MB in four batches of 800 KB.
            for _ in range(4):
                assert wire.produce(BIG_TOPIC, 0, batch_of(800_000, records=8)) == 0
        yield proc


class Bystander:
    """A well-behaved client asking for Metadata in a loop while the test misbehaves; records its slowest answer
    and the broker's largest RSS seen."""

    def __init__(self, broker: BrokerProcess) -> None:
        self._broker = broker
        self._stop = threading.Event()
        self.slowest_s = 0.0
        self.peak_rss_mb = rss_mb(broker.pid)
        self.answers = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with Wire(self._broker.port, timeout=60) as wire:
            while not self._stop.is_set():
                self.slowest_s = max(self.slowest_s, wire.timed_metadata([BIG_TOPIC]))
                self.answers += 1
                self.peak_rss_mb = max(self.peak_rss_mb, rss_mb(self._broker.pid))
                time.sleep(0.02)

    def __enter__(self) -> Bystander:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=90)
        assert not self._thread.is_alive(), "the bystander never got its answer"


def _settle(broker: BrokerProcess) -> float:
    """The broker's RSS once a Metadata request is answered (everything sent before it is handled)."""
    with Wire(broker.port) as wire:
        wire.metadata([BIG_TOPIC])
    return rss_mb(broker.pid)


def test_size_prefixes_alone_hold_no_memory(broker: BrokerProcess) -> None:
    """100 connections announcing 8 MB frames and sending nothing else: no buffer of the announced size (793 MB
    before), and the budget they reserve leaves room for others' requests."""
    before = _settle(broker)
    sockets = [socket.create_connection(("127.0.0.1", broker.port)) for _ in range(100)]
    try:
        for sock in sockets:
            sock.sendall(_SIZE.pack(8_388_608) + header_bytes(ApiKey.METADATA, 1))
        with Bystander(broker) as bystander:
            time.sleep(1.5)
        assert bystander.answers > 0
        assert bystander.peak_rss_mb - before < 64, (before, bystander.peak_rss_mb)
    finally:
        for sock in sockets:
            sock.close()


def test_metadata_of_four_million_empty_names_is_refused(broker: BrokerProcess) -> None:
    """An 8 MB Metadata request of 4M empty names (+1.87 GB and a 15.6 s stall before): decoding stops at
    MAX_REQUEST_ELEMENTS, the connection is closed, and a bystander keeps being answered."""
    before = _settle(broker)
    with Bystander(broker) as bystander, Wire(broker.port) as hostile:
        hostile.send(metadata_of_empty_names(4_000_000))
        assert hostile.closed_by_broker(timeout=30)
    assert bystander.slowest_s < BYSTANDER_MAX_S, bystander.slowest_s
    assert bystander.peak_rss_mb - before < 300, (before, bystander.peak_rss_mb)


def test_metadata_of_many_empty_names_within_the_bound_does_not_stall_others(broker: BrokerProcess) -> None:
    """90,000 empty names (within MAX_REQUEST_ELEMENTS), sent three times: decoded off the event loop, rationed,
    and answered with one entry each, while a bystander keeps being answered."""
    with Bystander(broker) as bystander, Wire(broker.port, timeout=60) as hostile:
        for _ in range(3):
            hostile.send(metadata_of_empty_names(90_000))
            answer = hostile.response(ApiKey.METADATA, 1)
    assert [(t.name, t.error_code) for t in answer.topics] == [("", 17)]  # INVALID_TOPIC_EXCEPTION
    assert bystander.slowest_s < 0.5, bystander.slowest_s


def test_topic_named_twenty_thousand_times_is_answered_once(broker: BrokerProcess) -> None:
    """A 200-partition topic named 20,000 times in a ~160 KB request (a 104 MB reply before): one entry."""
    request = metadata_frame([WIDE_TOPIC] * 20_000)
    assert len(request) < 200_000
    with Bystander(broker) as bystander, Wire(broker.port) as hostile:
        hostile.send(request)
        reply = hostile.read_frame()
    answer = decode_response(ApiKey.METADATA, 1, reply)
    assert [t.name for t in answer.topics] == [WIDE_TOPIC]
    assert len(answer.topics[0].partitions) == 200
    assert len(reply) < 100_000
    assert bystander.slowest_s < BYSTANDER_MAX_S, bystander.slowest_s


def test_fetch_listing_a_partition_a_hundred_times_reads_it_once_within_fetch_max_bytes(
    broker: BrokerProcess,
) -> None:
    """A 3.2 MB partition listed 100 times (320 MB returned before): one partition entry, its records within
    fetch.max.bytes (plus the one batch that may overshoot it, KIP-74)."""
    with Wire(broker.port) as wire:
        answer = wire.request(ApiKey.FETCH, FETCH_VERSION, fetch_body(BIG_TOPIC, [0] * 100))
    partitions = [p for t in answer.responses for p in t.partitions]
    assert len(partitions) == 1
    records = bytes(partitions[0].records)
    assert 0 < len(records) <= FETCH_MAX_BYTES + 800_100


def test_fetch_max_bytes_still_returns_the_first_batch() -> None:
    """fetch.max.bytes below a batch: the first batch comes whole all the same (KIP-74)."""
    with BrokerProcess(settings={"fetch.max.bytes": 1000}) as proc, Wire(proc.port) as wire:
        wire.create_topic("t", 1)
        assert wire.produce("t", 0, batch_of(5000)) == 0
        assert wire.produce("t", 0, batch_of(5000)) == 0
        answer = wire.request(ApiKey.FETCH, FETCH_VERSION, fetch_body("t", [0]))
        records = bytes(answer.responses[0].partitions[0].records)
        assert 5000 < len(records) < 6000


def test_fetches_never_read_pin_bounded_memory(broker: BrokerProcess) -> None:
    """Five connections pipelining Fetches of a partition listed 100 times and never reading (510 MB -> 6.6 GB
    before): each pins at most its responses' bound."""
    before = _settle(broker)
    request = frame(ApiKey.FETCH, FETCH_VERSION, fetch_body(BIG_TOPIC, [0] * 100))
    sockets = []
    try:
        for _ in range(5):
            sock = socket.create_connection(("127.0.0.1", broker.port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.settimeout(5)
            with contextlib.suppress(TimeoutError):
                sock.sendall(request * 4)
            sockets.append(sock)
        with Bystander(broker) as bystander:
            time.sleep(2)
        assert bystander.peak_rss_mb - before < 150, (before, bystander.peak_rss_mb)
    finally:
        for sock in sockets:
            sock.close()


def test_unsent_fetch_responses_share_one_budget(tmp_path: Path) -> None:
    """30 connections fetching a 3.2 MB partition and never reading pinned 30 x 3.2 MB: with a 4 MiB budget of
    unsent responses, each gets what is free and at least one batch (800 KB), and another consumer still gets a
    batch."""
    with BrokerProcess(tmp_path / "data", settings={"queued.max.request.bytes": 4 << 20}) as proc:
        with Wire(proc.port) as wire:
            wire.create_topic(BIG_TOPIC, 1)
            for _ in range(4):
                assert wire.produce(BIG_TOPIC, 0, batch_of(800_000, records=8)) == 0
        before = _settle(proc)
        request = frame(ApiKey.FETCH, FETCH_VERSION, fetch_body(BIG_TOPIC, [0]))
        sockets = []
        try:
            for _ in range(30):
                sock = socket.create_connection(("127.0.0.1", proc.port))
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
                sock.sendall(request)
                sockets.append(sock)
            time.sleep(1)
            with Wire(proc.port) as consumer:
                answer = consumer.request(ApiKey.FETCH, FETCH_VERSION, fetch_body(BIG_TOPIC, [0]))
            assert len(bytes(answer.responses[0].partitions[0].records)) >= 800_000
            grown = rss_mb(proc.pid) - before
            assert grown < 60, grown
        finally:
            for sock in sockets:
                sock.close()


def test_list_offsets_duplicates_are_invalid_request(broker: BrokerProcess) -> None:
    """A partition listed twice in ListOffsets: INVALID_REQUEST for each listing, as Kafka answers."""
    body = {
        "replica_id": -1,
        "topics": [
            {
                "name": BIG_TOPIC,
                "partitions": [{"partition_index": 0, "timestamp": -1}, {"partition_index": 0, "timestamp": -1}],
            },
            {"name": WIDE_TOPIC, "partitions": [{"partition_index": 3, "timestamp": -1}]},
        ],
    }
    with Wire(broker.port) as wire:
        answer = wire.request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION, body)
    assert [p.error_code for p in answer.topics[0].partitions] == [42, 42]  # INVALID_REQUEST
    assert answer.topics[1].partitions[0].error_code == 0


def test_parked_fetches_of_a_repeated_partition_do_not_slow_produce_and_end_with_their_client(
    broker: BrokerProcess,
) -> None:
    """Fetches listing one partition 20,000 times, parked for long (each produce took 2.3 s to acknowledge
    before, for up to 60 s after the clients closed): produce stays fast, and closing the clients frees their
    connections at once."""
    with Wire(broker.port) as probe:
        probe.metadata([BIG_TOPIC])
        baseline_fds = open_fds(broker.pid)
    hostile = [Wire(broker.port) for _ in range(3)]
    try:
        parked = frame(
            ApiKey.FETCH, FETCH_VERSION, fetch_body(BIG_TOPIC, [0] * 20_000, max_wait_ms=30_000, min_bytes=1 << 30)
        )
        for wire in hostile:
            wire.send(parked)
        time.sleep(1)
        slowest = 0.0
        with Wire(broker.port) as producer:
            for _ in range(10):
                started = time.monotonic()
                assert producer.produce(BIG_TOPIC, 0, batch_of(100)) == 0
                slowest = max(slowest, time.monotonic() - started)
        assert slowest < 1.0, slowest
    finally:
        for wire in hostile:
            wire.close()
    deadline = time.monotonic() + 5
    while open_fds(broker.pid) > baseline_fds and time.monotonic() < deadline:
        time.sleep(0.1)
    assert open_fds(broker.pid) <= baseline_fds, "parked fetches outlived their clients"


def _log_lines(broker: BrokerProcess, *needles: str) -> int:
    text = Path(broker.stderr_path).read_text(errors="replace")
    return sum(1 for line in text.splitlines() if all(n in line for n in needles))


def test_malformed_requests_are_logged_at_a_limited_rate(broker: BrokerProcess) -> None:
    """100 malformed requests in a row (100 info lines before): each connection closed, at most 5 lines."""
    before = _log_lines(broker, "bad_request")
    truncated = header_bytes(ApiKey.METADATA, 1) + _SIZE.pack(5)  # five topic names announced, none sent
    for _ in range(100):
        with Wire(broker.port) as wire:
            wire.send(_SIZE.pack(len(truncated)) + truncated)
            assert wire.closed_by_broker(timeout=10)
    assert _log_lines(broker, "bad_request") - before <= 5


def test_accept_failures_are_logged_at_a_limited_rate(tmp_path: Path) -> None:
    """Descriptors exhausted: the accept loop retries every 0.1 s; it logged a traceback each time before (~30
    in 3 s), at most 5 lines now. Connections are served again once descriptors are free."""
    command = ["prlimit", "--nofile=96:96", "--", *BrokerProcess().command]
    with BrokerProcess(tmp_path / "data", command=command) as proc:
        sockets = []
        try:
            for _ in range(120):
                sockets.append(socket.create_connection(("127.0.0.1", proc.port), timeout=5))
            time.sleep(3)
            assert _log_lines(proc, "accept", "EMFILE") <= 5
            assert _log_lines(proc, "accept", "EMFILE") >= 1
        finally:
            for sock in sockets:
                sock.close()
        time.sleep(0.5)
        with Wire(proc.port, timeout=10) as wire:
            wire.metadata([])


def _parked_fetch(topic: str) -> bytes:
    """A ~320 KB Fetch listing one partition 20,000 times that parks for 30 s (min_bytes never reached)."""
    return frame(ApiKey.FETCH, FETCH_VERSION, fetch_body(topic, [0] * 20_000, max_wait_ms=30_000, min_bytes=1 << 30))


def test_parked_fetches_give_back_their_request_bytes_once_decoded(tmp_path: Path) -> None:
    """Four ~320 KB Fetches parked for 30 s under a 1 MiB ``queued.max.request.bytes``: each gives its frame and
    its share of the budget back once decoded (as Kafka's RequestChannel releases a parsed request's buffer), so
    a large request after them is answered after their decodes. Before, the parked fetches held their frames
    until answered and the fourth one, then the Metadata request, waited for the first to time out (30 s)."""
    with BrokerProcess(tmp_path / "data", settings={"queued.max.request.bytes": 1 << 20}) as proc:
        with Wire(proc.port) as wire:
            wire.create_topic(BIG_TOPIC, 1)
        hostile = [Wire(proc.port) for _ in range(4)]
        try:
            for wire in hostile:
                wire.send(_parked_fetch(BIG_TOPIC))
            with Wire(proc.port, timeout=25) as wire:
                started = time.monotonic()
                wire.send(metadata_frame([BIG_TOPIC] * 20_000))  # ~160 KB: a large frame too
                answer = wire.response(ApiKey.METADATA, 1)
                waited = time.monotonic() - started
            assert [t.name for t in answer.topics] == [BIG_TOPIC]
            assert waited < 20, waited
        finally:
            for wire in hostile:
                wire.close()


def test_large_requests_of_clients_gone_are_not_decoded(broker: BrokerProcess) -> None:
    """30 clients each send a ~320 KB Fetch and close at once: queued for the one worker-thread decode (44 ms each,
    then a rest nine times as long), each was decoded before, so a large request after them waited 13 s or more
    (on an idle machine).
    Now a request whose client has gone is dropped when its turn comes."""
    request = _parked_fetch(BIG_TOPIC)
    for _ in range(30):
        with Wire(broker.port) as wire:
            wire.send(request)
    time.sleep(0.5)  # every frame read and queued
    with Wire(broker.port, timeout=30) as wire:
        started = time.monotonic()
        wire.send(metadata_frame([BIG_TOPIC] * 20_000))
        answer = wire.response(ApiKey.METADATA, 1)
        waited = time.monotonic() - started
    assert [t.name for t in answer.topics] == [BIG_TOPIC]
    assert waited < 8, waited


def test_clients_gone_while_waiting_for_the_request_budget_are_closed(tmp_path: Path) -> None:
    """Under a 1 MiB ``queued.max.request.bytes`` held by one client announcing a 900 KB frame, 50 clients announce
    400 KB frames, wait for the budget, then close. Their connections end within seconds; before, each stayed
    (descriptor, buffers) until its turn came, so the soak's replaced clients piled up in the broker."""
    with BrokerProcess(tmp_path / "data", settings={"queued.max.request.bytes": 1 << 20}) as proc:
        with Wire(proc.port) as probe:
            probe.metadata([])
        time.sleep(0.5)
        baseline_fds = open_fds(proc.pid)
        holder = socket.create_connection(("127.0.0.1", proc.port))
        try:
            holder.sendall(_SIZE.pack(900_000) + header_bytes(ApiKey.METADATA, 1))
            time.sleep(0.3)
            waiting = [socket.create_connection(("127.0.0.1", proc.port)) for _ in range(50)]
            for sock in waiting:
                sock.sendall(_SIZE.pack(400_000) + header_bytes(ApiKey.METADATA, 1))
            deadline = time.monotonic() + 10
            while open_fds(proc.pid) < baseline_fds + 51 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert open_fds(proc.pid) >= baseline_fds + 51  # the holder and the 50, accepted
            for sock in waiting:
                sock.close()
            deadline = time.monotonic() + 5
            while open_fds(proc.pid) > baseline_fds + 1 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert open_fds(proc.pid) <= baseline_fds + 1, open_fds(proc.pid) - baseline_fds
        finally:
            holder.close()
