"""An internal topic a coordinator keeps its state in (``__transaction_state``, ``__consumer_offsets``): the shape
both share, as Kafka's CoordinatorRuntime shares it between its coordinators.

- A key (transactional id, group id) lives in partition ``abs(hashCode(key)) % num_partitions`` (``partition_for``).
- The topic is created on first use with its internal-topic configs (``ensure_topic``; ``topic_made`` tells whether
  it could be).
- ``append_batch`` writes one batch as the coordinator (``AppendOrigin.COORDINATOR``) and, when asked to wait,
  returns once it is durable here and, on a partition led with followers, in the ISR (Kafka's acks=all, up to
  ``commit_timeout_ms``). Errors come back mapped to what the coordinator's clients understand (``append_errors``).
- ``replay`` reads a partition from its log start to its log end, every record with its batch header.

What differs stays with each topic's class: its record codecs and what the replay is folded into.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from oncelog.broker.clock import now_ms
from oncelog.broker.faults import fault_point
from oncelog.broker.flusher import UNWAITED_FLUSH_DELAY_S
from oncelog.protocol import ErrorCode
from oncelog.protocol.internal.java_hash import partition_for_key
from oncelog.protocol.records import BatchHeader, Record, iter_batches
from oncelog.storage.append_origin import AppendOrigin
from oncelog.storage.log import PartitionLog

if TYPE_CHECKING:
    from oncelog.broker.replica_manager import ReplicaManager
    from oncelog.storage.log_manager import LogManager

#: Bytes read per step while replaying.
REPLAY_CHUNK_BYTES = 8 * 1024 * 1024


def replay(partition_log: PartitionLog | None) -> Iterator[tuple[BatchHeader, Record]]:
    """Every record from the log start to the log end, in offset order, with its batch header (control batches
    included); nothing for a missing log."""
    if partition_log is None:
        return
    offset = partition_log.log_start_offset
    end = partition_log.log_end_offset
    while offset < end:
        chunk = partition_log.read(offset, REPLAY_CHUNK_BYTES, max_offset=end)
        if not chunk:
            break
        for header, records in iter_batches(chunk):
            for record in records:
                if record.offset >= offset:
                    yield header, record
            offset = max(offset, header.next_offset)


class InternalTopicLog:
    """One internal topic's partitions: keyed placement, durable appends, replay (see the module docstring)."""

    def __init__(
        self,
        topic: str,
        num_partitions: int,
        *,
        replicas: ReplicaManager,
        logs: LogManager,
        create_topic: Callable[[], Awaitable[object]],
        commit_timeout_ms: int,
        append_errors: Mapping[ErrorCode, ErrorCode],
        other_errors: ErrorCode | None = None,
        unwaited_delay_s: float = UNWAITED_FLUSH_DELAY_S,
        after_append_fault: str | None = None,
    ) -> None:
        """``create_topic`` creates the topic with its internal-topic configs unless it exists. ``append_errors``
        maps append errors for the clients; ``other_errors`` (None: the error as it is) is what any other error
        becomes. ``unwaited_delay_s`` is how soon fsync mode syncs a record nobody waits for;
        ``after_append_fault`` names a fault point between the append and the wait (``broker.faults``)."""
        self.topic = topic
        self.num_partitions = num_partitions
        self._replicas = replicas
        self._logs = logs
        self._create_topic = create_topic
        self._commit_timeout_s = commit_timeout_ms / 1000
        self._append_errors = append_errors
        self._other_errors = other_errors
        self._unwaited_delay_s = unwaited_delay_s
        self._after_append_fault = after_append_fault

    def partition_for(self, key: str) -> int:
        """The partition holding ``key``'s records (Kafka's ``Utils.abs(key.hashCode) % partitions``)."""
        return partition_for_key(key, self.num_partitions)

    async def ensure_topic(self) -> None:
        """Create the topic on first use, as Kafka does; returns once its logs exist. OSError when it cannot be
        created now (on a cluster: fewer live brokers than its replication factor, etcd away)."""
        await self._create_topic()

    async def topic_made(self) -> bool:
        """``ensure_topic`` answering instead of raising: False while the topic cannot be created. No partition of
        it is then led here, so the coordinator's ``status`` is NOT_COORDINATOR for every key, as Kafka's
        coordinators answer for a partition they do not host."""
        try:
            await self.ensure_topic()
        except OSError:
            return False
        return True

    async def append_batch(self, key: str, batch: bytes, *, wait: bool = True) -> tuple[ErrorCode, int]:
        """Append ``batch`` to ``key``'s partition as the coordinator; with ``wait``, return once it is durable (and
        in the ISR on a partition led with followers). Returns (error, offset of the batch's first record); on an
        error (mapped, see ``__init__``) the offset is -1."""
        await self.ensure_topic()
        partition = self.partition_for(key)
        outcome = self._replicas.append(
            self.topic,
            partition,
            batch,
            now_ms(),
            origin=AppendOrigin.COORDINATOR,
            unwaited_delay_s=self._unwaited_delay_s,
        )
        if outcome.error != ErrorCode.NONE or outcome.result is None:
            return self._mapped(outcome.error), -1
        if self._after_append_fault is not None:
            fault_point(self._after_append_fault)
        if wait:
            end = outcome.result.last_offset + 1
            error = await self._replicas.wait_committed(self.topic, partition, end, self._commit_timeout_s)
            if error != ErrorCode.NONE:
                return self._mapped(error), -1
        return ErrorCode.NONE, outcome.result.first_offset

    def _mapped(self, error: ErrorCode) -> ErrorCode:
        return self._append_errors.get(error, error if self._other_errors is None else self._other_errors)

    def replay(self, partition: int) -> Iterator[tuple[BatchHeader, Record]]:
        """Every record of ``partition`` from its log start to its log end (see :func:`replay`)."""
        return replay(self._logs.get(self.topic, partition))
