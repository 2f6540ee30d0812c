"""Transaction markers on a cluster: Kafka's TransactionMarkerChannelManager.

Guarantees:
- Each partition's marker goes to the partition's leader as the cluster view names it when the marker is routed.
  There is one queue per destination broker and one request in flight to each at a time; everything queued for a
  broker meanwhile (the markers of many transactions) goes out together in its next WriteTxnMarkers request. Markers
  for partitions this broker leads are appended here (the ``local`` writer) through the same queue.
- A destination that is slow or unreachable holds up only its own queue: the transaction's partitions led elsewhere
  get their markers at once.
- A partition whose write fails with a retriable error (NOT_LEADER_OR_FOLLOWER, a lost or refused connection,
  NOT_ENOUGH_REPLICAS, a timeout, ...) is routed again after ``MARKER_RETRY_BACKOFF_MS`` to its *current* leader,
  for as long as it takes (a partition without a leader waits for one); an in-flight request is given up early when
  the view moves one of its partitions to another leader. ``write`` therefore returns only final outcomes: NONE,
  UNKNOWN_TOPIC_OR_PARTITION (the view no longer has the partition: deleted, as Kafka drops it),
  TRANSACTION_COORDINATOR_FENCED / INVALID_PRODUCER_EPOCH (the coordinator was deposed), or Kafka's dropped errors.
- Cancelling ``write`` withdraws its markers that have not been sent.
- Requests to other brokers go through ``PeerConnections``, the client's own connection code.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import structlog
import trio
from oncelog.broker.controller.partition_change import PartitionState
from oncelog.broker.log_limit import LogRateLimiter
from oncelog.broker.txn.markers import MARKER_FENCED, MARKER_SETTLED, MarkerWriter, TxnMarker
from oncelog.protocol import ApiKey, ErrorCode

from .peers import PeerUnavailable

log = structlog.get_logger(__name__)
#: A dead leader stays named until its session ends: its retries (every ``retry.backoff.ms``) log a few lines, then a
#: count.
_LOG_LIMIT = LogRateLimiter()

#: Kafka's ``retry.backoff.ms`` (100 ms): the pause before a failed partition's marker is routed again, and how often
#: an in-flight request is checked against the cluster view.
MARKER_RETRY_BACKOFF_MS = 100

#: Outcomes after which a partition's marker is not sent again, but for UNKNOWN_TOPIC_OR_PARTITION, which is final
#: only when the view agrees that the partition is gone (a broker that is no replica of it answers so too).
FINAL_ERRORS = (MARKER_SETTLED | MARKER_FENCED) - {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}

TopicPartition = tuple[str, int]


class PeerRequester(Protocol):
    async def request(self, broker_id: int, key: ApiKey, body: Mapping[str, Any]) -> Any:
        """The decoded response of ``broker_id``; PeerUnavailable when it cannot be sent or answered."""
        ...


@dataclass(eq=False)
class _Delivery:
    """One ``write``: the partitions still without a final outcome, and the outcomes so far."""

    marker: TxnMarker
    waiting: set[TopicPartition]
    outcomes: dict[TopicPartition, ErrorCode] = field(default_factory=dict)
    done: trio.Event = field(default_factory=trio.Event)
    withdrawn: bool = False

    def settle(self, tp: TopicPartition, error: ErrorCode) -> None:
        if tp in self.waiting:
            self.waiting.discard(tp)
            self.outcomes[tp] = error
            if not self.waiting:
                self.done.set()

    def part(self, partitions: frozenset[TopicPartition]) -> TxnMarker:
        m = self.marker
        return TxnMarker(m.producer_id, m.producer_epoch, m.coordinator_epoch, m.commit, partitions)


#: A queued piece of a delivery: its partitions led by one destination.
_Entry = tuple[_Delivery, frozenset[TopicPartition]]


class MarkerChannel:
    """Routes markers to partition leaders: ``local`` writes this broker's, ``peers`` reaches the others. Run ``run``
    for the broker's lifetime; ``write`` is the ``MarkerWriter`` the transaction coordinator uses."""

    def __init__(
        self,
        node_id: int,
        partition_state: Callable[[str, int], PartitionState | None],
        local: MarkerWriter,
        peers: PeerRequester,
        *,
        retry_backoff_ms: int = MARKER_RETRY_BACKOFF_MS,
    ) -> None:
        self._node_id = node_id
        self._partition_state = partition_state
        self._local = local
        self._peers = peers
        self._backoff_s = retry_backoff_ms / 1000
        self._queues: dict[int, list[_Entry]] = defaultdict(list)
        self._wakeups: dict[int, trio.Event] = {}
        self._retry: list[tuple[_Delivery, TopicPartition]] = []
        self._retry_wakeup = trio.Event()
        self._nursery: trio.Nursery | None = None
        #: WriteTxnMarkers requests sent to each other broker (for tests and logs).
        self.requests_sent: dict[int, int] = defaultdict(int)

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._retry_loop)
            task_status.started()
            try:
                await trio.sleep_forever()
            finally:
                self._nursery = None

    async def write(self, marker: TxnMarker) -> dict[TopicPartition, ErrorCode]:
        """Every partition's final outcome, once each has one (see the module's guarantees); NOT_LEADER_OR_FOLLOWER
        for every partition while the channel is not running."""
        if self._nursery is None:  # not running (yet, or any more): nothing can be sent
            return dict.fromkeys(marker.partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        delivery = _Delivery(marker, set(marker.partitions))
        if not delivery.waiting:
            return {}
        self._route(delivery, marker.partitions)
        try:
            await delivery.done.wait()
        finally:
            delivery.withdrawn = True
        return dict(delivery.outcomes)

    # Routing ---------------------------------------------------------------------------------------------------

    def _route(self, delivery: _Delivery, partitions: frozenset[TopicPartition] | set[TopicPartition]) -> None:
        by_leader: dict[int, set[TopicPartition]] = defaultdict(set)
        for tp in partitions:
            state = self._partition_state(*tp)
            if state is None:
                delivery.settle(tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif state.leader < 0:
                self._retry.append((delivery, tp))
                self._retry_wakeup.set()
            else:
                by_leader[state.leader].add(tp)
        for leader, led in by_leader.items():
            self._queues[leader].append((delivery, frozenset(led)))
            if leader not in self._wakeups:
                self._wakeups[leader] = trio.Event()
                assert self._nursery is not None
                self._nursery.start_soon(self._sender, leader)
            self._wakeups[leader].set()

    def _outcome(self, delivery: _Delivery, tp: TopicPartition, error: ErrorCode) -> None:
        """Settle a final outcome, or queue the partition to be routed again."""
        if (
            error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and self._partition_state(*tp) is None
        ) or error in FINAL_ERRORS:
            delivery.settle(tp, error)
        elif not delivery.withdrawn:
            self._retry.append((delivery, tp))
            self._retry_wakeup.set()

    async def _retry_loop(self) -> None:
        while True:
            await self._retry_wakeup.wait()
            await trio.sleep(self._backoff_s)
            self._retry_wakeup = trio.Event()
            due, self._retry = self._retry, []
            pending: dict[_Delivery, set[TopicPartition]] = defaultdict(set)
            for delivery, tp in due:
                if not delivery.withdrawn:
                    pending[delivery].add(tp)
            for delivery, partitions in pending.items():
                self._route(delivery, partitions)

    # Sending ---------------------------------------------------------------------------------------------------

    async def _sender(self, destination: int) -> None:
        """Drain ``destination``'s queue, one request (every queued marker) at a time."""
        wakeup = self._wakeups[destination]
        while True:
            await wakeup.wait()
            wakeup = self._wakeups[destination] = trio.Event()
            batch = [entry for entry in self._queues.pop(destination, []) if not entry[0].withdrawn]
            if not batch:
                continue
            if destination == self._node_id:
                await self._write_local(batch)
            else:
                await self._write_remote(destination, batch)

    async def _write_local(self, batch: list[_Entry]) -> None:
        async def write_one(delivery: _Delivery, partitions: frozenset[TopicPartition]) -> None:
            errors = await self._local.write(delivery.part(partitions))
            for tp in partitions:
                self._outcome(delivery, tp, errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR))

        async with trio.open_nursery() as nursery:
            for delivery, partitions in batch:
                nursery.start_soon(write_one, delivery, partitions)

    async def _write_remote(self, destination: int, batch: list[_Entry]) -> None:
        response: Any = None
        moved = False
        async with trio.open_nursery() as nursery:

            async def send() -> None:
                nonlocal response
                try:
                    response = await self._peers.request(destination, ApiKey.WRITE_TXN_MARKERS, request_body(batch))
                except PeerUnavailable as exc:
                    _LOG_LIMIT.log(log.warning, "markers_not_sent", destination, broker=destination, error=str(exc))
                nursery.cancel_scope.cancel()

            async def watch() -> None:
                nonlocal moved
                while not moved:
                    await trio.sleep(self._backoff_s)
                    moved = any(self._leader(tp) != destination for _, partitions in batch for tp in partitions)
                log.warning("markers_rerouted", broker=destination, reason="leader moved while in flight")
                nursery.cancel_scope.cancel()

            self.requests_sent[destination] += 1
            nursery.start_soon(send)
            nursery.start_soon(watch)
        answered = response_errors(response) if response is not None else []
        for index, (delivery, partitions) in enumerate(batch):
            errors = answered[index] if index < len(answered) else {}
            for tp in partitions:
                self._outcome(delivery, tp, errors.get(tp, ErrorCode.NOT_LEADER_OR_FOLLOWER))

    def _leader(self, tp: TopicPartition) -> int:
        state = self._partition_state(*tp)
        return state.leader if state is not None else -1


def request_body(batch: list[_Entry]) -> dict[str, Any]:
    """A WriteTxnMarkers request carrying one marker per entry, in order."""
    markers = []
    for delivery, partitions in batch:
        topics: dict[str, list[int]] = defaultdict(list)
        for topic, partition in sorted(partitions):
            topics[topic].append(partition)
        m = delivery.marker
        markers.append(
            {
                "producer_id": m.producer_id,
                "producer_epoch": m.producer_epoch,
                "transaction_result": m.commit,
                "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                "coordinator_epoch": m.coordinator_epoch,
            }
        )
    return {"markers": markers}


def response_errors(response: Any) -> list[dict[TopicPartition, ErrorCode]]:
    """Per request marker (the response keeps the request's order), each partition's error."""
    results: list[dict[TopicPartition, ErrorCode]] = []
    for entry in response.markers:
        errors: dict[TopicPartition, ErrorCode] = {}
        for topic in entry.topics:
            for p in topic.partitions:
                errors[(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        results.append(errors)
    return results
