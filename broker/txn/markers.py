"""Writing transaction markers: the partition leader's side of WriteTxnMarkers, behind one interface.

The coordinator hands a ``TxnMarker`` to a ``MarkerWriter``. Here the leader of every partition is this broker, so
``LocalMarkerWriter`` appends the control batches itself (the WriteTxnMarkers handler calls the same function); in a
cluster a writer that sends WriteTxnMarkers requests to each leader takes its place.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

import trio
from oncelog.broker.clock import now_ms
from oncelog.broker.faults import fault_point
from oncelog.broker.replica_manager import ReplicaManager
from oncelog.protocol import ErrorCode
from oncelog.protocol.records import ControlType, encode_control_batch
from oncelog.storage.append_origin import AppendOrigin

#: How long a marker waits for its partition's ISR (Kafka's WriteTxnMarkers append uses ``request.timeout.ms``).
MARKER_REPLICATION_TIMEOUT_MS = 30000


@dataclass(frozen=True)
class TxnMarker:
    """The decision for one producer's transaction and the partitions that must learn it."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool
    partitions: frozenset[tuple[str, int]]


#: Outcomes of a partition's marker write after which it is not written again: written, the partition deleted, or
#: a log that cannot hold markers (Kafka drops those partitions); every other error is retried.
MARKER_SETTLED = frozenset(
    {
        ErrorCode.NONE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        ErrorCode.UNSUPPORTED_VERSION,
    }
)
#: Outcomes that tell the coordinator it was deposed: it stops writing the transaction's markers (Kafka's
#: TransactionMarkerRequestCompletionHandler treats both alike).
MARKER_FENCED = frozenset({ErrorCode.TRANSACTION_COORDINATOR_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH})


class MarkerListener(Protocol):
    """Told of every marker appended to a partition of this broker (the group coordinator: it commits or drops a
    producer's pending transactional offsets once the marker is in ``__consumer_offsets``, as Kafka's
    onTransactionCompleted)."""

    def on_marker(self, topic: str, partition: int, producer_id: int, commit: bool) -> None: ...


class MarkerWriter(Protocol):
    async def write(self, marker: TxnMarker) -> dict[tuple[str, int], ErrorCode]:
        """Append the marker to every partition and return once each is durable; per-partition errors."""
        ...


def marker_batch(marker: TxnMarker) -> bytes:
    """The control batch that carries ``marker`` (the same bytes serve every partition: the log assigns offsets)."""
    return encode_control_batch(
        ControlType.COMMIT if marker.commit else ControlType.ABORT,
        producer_id=marker.producer_id,
        producer_epoch=marker.producer_epoch,
        coordinator_epoch=marker.coordinator_epoch,
        timestamp_ms=now_ms(),
    )


def append_markers(
    replicas: ReplicaManager,
    marker: TxnMarker,
    partitions: Iterable[tuple[str, int]],
    batch: bytes | None = None,
    *,
    listener: MarkerListener | None,
) -> dict[tuple[str, int], tuple[ErrorCode, int]]:
    """Append the control batch (``batch``, else ``marker_batch(marker)``) to each partition, not yet durable:
    partition -> (error, end offset).

    Every successful append is reported to ``listener``, in order.
    """
    if batch is None:
        batch = marker_batch(marker)
    outcomes: dict[tuple[str, int], tuple[ErrorCode, int]] = {}
    for topic, partition in partitions:
        outcome = replicas.append(topic, partition, batch, now_ms(), origin=AppendOrigin.COORDINATOR)
        end = outcome.result.last_offset + 1 if outcome.result is not None else -1
        outcomes[(topic, partition)] = (outcome.error, end)
        if outcome.error == ErrorCode.NONE and listener is not None:
            listener.on_marker(topic, partition, marker.producer_id, marker.commit)
    return outcomes


async def wait_markers_durable(
    replicas: ReplicaManager, appended: dict[tuple[str, int], tuple[ErrorCode, int]]
) -> dict[tuple[str, int], ErrorCode]:
    """Wait until every successfully appended marker is fsynced (the partitions' fsyncs run in parallel) and, on a
    partition led with followers, replicated to its ISR (Kafka appends markers with acks=all: a marker the next
    leader lacks would leave the transaction open there for good)."""
    waiters = {
        tp: replicas.request_durable(*tp, end) for tp, (error, end) in appended.items() if error == ErrorCode.NONE
    }
    errors: dict[tuple[str, int], ErrorCode] = {}
    for tp, (error, _end) in appended.items():
        errors[tp] = await replicas.wait_requested(waiters[tp]) if tp in waiters else error
    deadline = trio.current_time() + MARKER_REPLICATION_TIMEOUT_MS / 1000
    for tp, (_error, end) in appended.items():
        if errors[tp] == ErrorCode.NONE and replicas.replicated(*tp):
            errors[tp] = await replicas.wait_replicated(*tp, end, deadline)
    return errors


class LocalMarkerWriter:
    """Writes markers to partitions this broker leads, telling ``listener`` of each."""

    def __init__(self, replicas: ReplicaManager, listener: MarkerListener) -> None:
        self._replicas = replicas
        self._listener = listener

    async def write(self, marker: TxnMarker) -> dict[tuple[str, int], ErrorCode]:
        first, *rest = sorted(marker.partitions) or [None]
        if first is None:
            return {}
        batch = marker_batch(marker)
        appended = append_markers(self._replicas, marker, [first], batch, listener=self._listener)
        fault_point("txn.after_first_marker")
        if rest:
            appended |= append_markers(self._replicas, marker, rest, batch, listener=self._listener)
        return await wait_markers_durable(self._replicas, appended)
