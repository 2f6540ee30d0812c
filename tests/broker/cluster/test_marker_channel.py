"""The cluster's marker channel (broker/cluster/markers.py) against a fake cluster view and fake peers: batching per
destination broker, re-routing to the current leader, and partitions whose leader is away holding only themselves."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
import trio
from oncelog.broker.cluster.markers import MarkerChannel
from oncelog.broker.cluster.peers import PeerUnavailable
from oncelog.broker.controller.partition_change import PartitionState
from oncelog.broker.txn.markers import TxnMarker
from oncelog.protocol import ApiKey, ErrorCode

SELF = 1
BACKOFF_MS = 10
TP = tuple[str, int]


class FakeView:
    """Partition -> leader; a partition missing from ``leaders`` does not exist."""

    def __init__(self, leaders: dict[TP, int]) -> None:
        self.leaders = leaders

    def __call__(self, topic: str, partition: int) -> PartitionState | None:
        leader = self.leaders.get((topic, partition))
        return None if leader is None else PartitionState(replicas=(1, 2, 3), isr=(1, 2, 3), leader=leader)


class FakePeers:
    """Answers WriteTxnMarkers with ``answer(broker, topic, partition)`` (NONE by default) once ``gates[broker]``
    (if any) is set; ``down`` brokers raise PeerUnavailable. Every request is recorded."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, list[dict[str, Any]]]] = []
        self.gates: dict[int, trio.Event] = {}
        self.down: set[int] = set()
        self.answer: Callable[[int, str, int], ErrorCode] = lambda broker, topic, partition: ErrorCode.NONE

    def written(self, broker: int) -> list[tuple[int, TP]]:
        """(producer id, partition) of every marker sent to ``broker``."""
        return [
            (m["producer_id"], (t["name"], p))
            for b, markers in self.requests
            if b == broker
            for m in markers
            for t in m["topics"]
            for p in t["partition_indexes"]
        ]

    async def request(self, broker_id: int, key: ApiKey, body: dict[str, Any]) -> Any:
        assert key == ApiKey.WRITE_TXN_MARKERS
        self.requests.append((broker_id, body["markers"]))
        if broker_id in self.down:
            raise PeerUnavailable(f"broker {broker_id} is down")
        if broker_id in self.gates:
            await self.gates[broker_id].wait()
        return SimpleNamespace(
            markers=[
                SimpleNamespace(
                    producer_id=m["producer_id"],
                    topics=[
                        SimpleNamespace(
                            name=t["name"],
                            partitions=[
                                SimpleNamespace(partition_index=p, error_code=self.answer(broker_id, t["name"], p))
                                for p in t["partition_indexes"]
                            ],
                        )
                        for t in m["topics"]
                    ],
                )
                for m in body["markers"]
            ]
        )


class FakeLocal:
    def __init__(self) -> None:
        self.written: list[TxnMarker] = []

    async def write(self, marker: TxnMarker) -> dict[TP, ErrorCode]:
        self.written.append(marker)
        return dict.fromkeys(marker.partitions, ErrorCode.NONE)


def marker(producer_id: int, *partitions: TP, commit: bool = True) -> TxnMarker:
    return TxnMarker(producer_id, 0, 0, commit, frozenset(partitions))


class Harness:
    def __init__(self, leaders: dict[TP, int]) -> None:
        self.view = FakeView(leaders)
        self.peers = FakePeers()
        self.local = FakeLocal()
        self.channel = MarkerChannel(SELF, self.view, self.local, self.peers, retry_backoff_ms=BACKOFF_MS)
        self.results: dict[int, dict[TP, ErrorCode]] = {}

    def start_write(self, nursery: trio.Nursery, m: TxnMarker) -> None:
        async def write() -> None:
            self.results[m.producer_id] = await self.channel.write(m)

        nursery.start_soon(write)


async def settle() -> None:
    """Long enough for several retry rounds."""
    await trio.sleep(BACKOFF_MS * 10 / 1000)


@pytest.fixture
async def harness(nursery: trio.Nursery) -> Harness:
    h = Harness({("t", 0): SELF, ("t", 1): 2, ("t", 2): 3, ("u", 0): 2})
    await nursery.start(h.channel.run)
    return h


async def test_markers_queued_for_a_broker_during_a_request_go_out_together(harness: Harness) -> None:
    harness.peers.gates[2] = trio.Event()
    async with trio.open_nursery() as nursery:
        harness.start_write(nursery, marker(10, ("t", 1)))
        await settle()
        for producer_id in (11, 12, 13):
            harness.start_write(nursery, marker(producer_id, ("t", 1), ("u", 0)))
        await settle()
        assert len(harness.peers.requests) == 1  # one request in flight per destination
        harness.peers.gates[2].set()
    assert [len(markers) for _, markers in harness.peers.requests] == [1, 3]
    assert harness.channel.requests_sent[2] == 2
    assert all(result == dict.fromkeys(result, ErrorCode.NONE) for result in harness.results.values())
    assert sorted(harness.results) == [10, 11, 12, 13]


async def test_a_slow_broker_holds_only_its_own_partitions(harness: Harness) -> None:
    harness.peers.gates[2] = trio.Event()
    async with trio.open_nursery() as nursery:
        harness.start_write(nursery, marker(20, ("t", 0), ("t", 1), ("t", 2)))
        await settle()
        assert harness.local.written and harness.peers.written(3) == [(20, ("t", 2))]  # written at once
        assert 20 not in harness.results  # the transaction waits for broker 2's partition
        harness.peers.gates[2].set()
    assert harness.results[20] == dict.fromkeys([("t", 0), ("t", 1), ("t", 2)], ErrorCode.NONE)


async def test_not_leader_is_sent_again_to_the_current_leader(harness: Harness) -> None:
    def answer(broker: int, topic: str, partition: int) -> ErrorCode:
        if broker == 2:
            harness.view.leaders[(topic, partition)] = 3  # the leader moved on
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ErrorCode.NONE

    harness.peers.answer = answer
    assert await harness.channel.write(marker(30, ("t", 1), ("t", 2))) == {
        ("t", 1): ErrorCode.NONE,
        ("t", 2): ErrorCode.NONE,
    }
    assert (30, ("t", 1)) in harness.peers.written(2) and (30, ("t", 1)) in harness.peers.written(3)


async def test_a_lost_connection_is_retried_until_the_partition_has_a_reachable_leader(harness: Harness) -> None:
    harness.peers.down.add(2)
    async with trio.open_nursery() as nursery:
        harness.start_write(nursery, marker(40, ("t", 1), ("t", 2)))
        await settle()
        assert len(harness.peers.written(2)) >= 2  # retried while broker 2 is unreachable
        assert harness.peers.written(3) == [(40, ("t", 2))]  # sent once: only the failed partition is retried
        assert 40 not in harness.results
        harness.view.leaders[("t", 1)] = 3
    assert harness.results[40] == {("t", 1): ErrorCode.NONE, ("t", 2): ErrorCode.NONE}


async def test_a_partition_without_a_leader_waits_for_one(harness: Harness) -> None:
    harness.view.leaders[("t", 1)] = -1
    async with trio.open_nursery() as nursery:
        harness.start_write(nursery, marker(50, ("t", 1), ("t", 2)))
        await settle()
        assert harness.peers.written(3) == [(50, ("t", 2))]
        assert harness.peers.written(2) == [] and 50 not in harness.results
        harness.view.leaders[("t", 1)] = 2
    assert harness.results[50] == {("t", 1): ErrorCode.NONE, ("t", 2): ErrorCode.NONE}


async def test_a_request_to_a_stuck_broker_is_given_up_when_its_partition_moves(harness: Harness) -> None:
    harness.peers.gates[2] = trio.Event()  # broker 2 never answers (stopped)
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            harness.start_write(nursery, marker(60, ("t", 1)))
            await settle()
            harness.view.leaders[("t", 1)] = 3  # a new leader is elected
    assert harness.results[60] == {("t", 1): ErrorCode.NONE}
    assert harness.peers.written(3) == [(60, ("t", 1))]


async def test_unknown_partition_is_final_only_once_the_view_agrees(harness: Harness) -> None:
    harness.peers.answer = lambda broker, topic, partition: ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    async with trio.open_nursery() as nursery:
        harness.start_write(nursery, marker(70, ("t", 1)))
        await settle()
        assert len(harness.peers.written(2)) >= 2 and 70 not in harness.results  # a stale answer: retried
        del harness.view.leaders[("t", 1)]  # deleted
    assert harness.results[70] == {("t", 1): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}


async def test_fenced_is_final(harness: Harness) -> None:
    harness.peers.answer = lambda broker, topic, partition: ErrorCode.TRANSACTION_COORDINATOR_FENCED
    with trio.fail_after(5):
        result = await harness.channel.write(marker(80, ("t", 1), ("t", 2)))
    assert set(result.values()) == {ErrorCode.TRANSACTION_COORDINATOR_FENCED}
    assert len(harness.peers.requests) == 2


async def test_a_cancelled_write_withdraws_its_unsent_markers(harness: Harness) -> None:
    harness.peers.gates[2] = trio.Event()
    async with trio.open_nursery() as nursery:
        harness.start_write(nursery, marker(90, ("t", 1)))
        await settle()
        with trio.move_on_after(BACKOFF_MS / 1000):
            await harness.channel.write(marker(91, ("t", 1)))  # queued behind 90, then given up
        harness.peers.gates[2].set()
    await settle()
    assert harness.peers.written(2) == [(90, ("t", 1))]


async def test_not_running_answers_not_leader() -> None:
    channel = MarkerChannel(SELF, FakeView({("t", 1): 2}), FakeLocal(), FakePeers())
    assert await channel.write(marker(1, ("t", 1))) == {("t", 1): ErrorCode.NOT_LEADER_OR_FOLLOWER}
