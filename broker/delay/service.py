"""The DelayService: consumes every delay level, and when a record is due forwards it to its target (or moves it to a
lower level), each batch of forwards one transaction with the consumed offsets.

Guarantees:
- exactly once across crashes and changes of owner: a record's forward (delivery, move to another level,
  dead-lettering, or the cancellation's clean-up) commits in the same transaction as its level partition's consumed
  offset, with a read_committed consumer, so after a crash the service resumes at the committed offsets and nothing
  is forwarded twice or lost. Each level partition has its own producer, transactional id
  ``<transactional_id>-<topic>-<partition>`` (as Kafka Streams has one per task): whoever takes a partition over
  (the service beside its new leader, or a restarted twin) initialises that id before reading the committed offset,
  which fences the previous owner's producer and aborts its open transaction;
- it serves only the level partitions ``owns`` accepts (all without it; inside a cluster member, those its broker
  leads), looked at every ``DISCOVERY_INTERVAL_S`` and at once after ``reassign_soon``: a partition it stops owning
  is dropped with its buffer and producer;
- never before due, and (for a record whose level was chosen by ``choose_level``) within the smallest level's
  duration after due plus the time of one forward, because one partition's records are acted on in append order
  (``route``) and only a wait shorter than the smallest level can hold a partition's later records;
- memory bounded: at most ``delay.max.buffered.records`` fetched records per level partition (plus one fetch
  response); a partition holding that many is not fetched (paused) until its head has been forwarded;
- cancellations: the cancel topic is read to its end before the first forward, then with every fetch; a
  cancellation acknowledged at least ``DISCOVERY_INTERVAL_S`` before the record's due time takes effect;
- nothing is created on the broker until a producer first uses a delay level: the service polls for the level
  topics (and for partitions and levels added later) every ``DISCOVERY_INTERVAL_S``; once one exists it has the
  broker create the others (in the background, retried until all exist), so that a record's first move to a level
  does not wait for that topic's creation, which cannot succeed while brokers are away (a ~30 s stall after a
  broker's death, in a cluster). A record is moved only to levels whose topics exist.

Any error ends the round: the open transaction is aborted, clients are closed, and the service starts again from the
committed offsets after ``RESTART_BACKOFF_S`` (so a broker restart under a separate service costs a retry, not data).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import structlog
from oncelog.broker.delay.buffer import DELAY_MAX_BUFFERED_RECORDS, PartitionBuffer
from oncelog.broker.delay.route import REASON_NO_TARGET, Action, Cancelled, DeadLetter, Deliver, Hop, route
from oncelog.client.accumulator import record_size
from oncelog.client.admin import Admin
from oncelog.client.consumer import Consumer
from oncelog.client.dead_letter import dead_letter_headers
from oncelog.client.delay import (
    CANCEL_TOPIC,
    ORIGINAL_TIMESTAMP_HEADER,
    DelayLevel,
    commit_metadata,
)
from oncelog.client.eos import transaction
from oncelog.client.errors import KafkaError, KafkaTimeoutError
from oncelog.client.future import Future
from oncelog.client.producer import Producer, make_record
from oncelog.client.types import ConsumerRecord, OffsetAndMetadata, RecordMetadata, TopicPartition
from oncelog.protocol import ErrorCode
from oncelog.protocol.records import SimpleRecord

log = structlog.get_logger(__name__)

#: The group under which the service commits its consumed offsets of the level topics.
DELAY_GROUP_ID = "__oncelog-delay"
#: Records forwarded in one transaction at most (bounds a transaction's size and the time between commits).
MAX_RECORDS_PER_TRANSACTION = 5000
#: Longest fetch wait when nothing is due sooner: how often new records and cancellations are looked at.
IDLE_WAIT_MS = 200
RESTART_BACKOFF_S = 1.0
#: How often the service looks for delay topics and partitions created since (the first use of a level, or of
#: cancellation, is seen within this).
DISCOVERY_INTERVAL_S = 1.0
#: Longest wait for one request creating the missing level topics (in the background).
LEVEL_CREATION_WAIT_S = 5.0
#: Latenesses of the last deliveries kept for ``stats``.
LATENESS_WINDOW = 1000


def wall_clock_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class LevelStats:
    """Counts since the service started, per level."""

    delivered: int = 0
    moved: int = 0
    dead_lettered: int = 0
    cancelled: int = 0
    buffered: int = 0


@dataclass
class DelayStats:
    """What the service has done; ``lateness_ms`` holds the last deliveries' lateness (delivery time - due)."""

    levels: dict[str, LevelStats] = field(default_factory=dict)
    lateness_ms: deque[int] = field(default_factory=lambda: deque(maxlen=LATENESS_WINDOW))
    transactions: int = 0
    restarts: int = 0


class DelayService:
    """Run with ``await service.run()`` (anyio: trio or asyncio); see the module docstring."""

    def __init__(
        self,
        bootstrap_servers: str,
        levels: Sequence[DelayLevel],
        *,
        transactional_id: str,
        group_id: str = DELAY_GROUP_ID,
        max_buffered_records: int = DELAY_MAX_BUFFERED_RECORDS,
        dead_letter_topic: str | None = None,
        clock_ms: Callable[[], int] = wall_clock_ms,
        owns: Callable[[TopicPartition], bool] | None = None,
        **security: Any,
    ) -> None:
        if not levels:
            raise ValueError("the DelayService needs at least one delay level")
        self.bootstrap_servers = bootstrap_servers
        self.levels = tuple(sorted(levels))
        self.transactional_id = transactional_id
        self.group_id = group_id
        self.max_buffered_records = max_buffered_records
        self.dead_letter_topic = dead_letter_topic or None
        self._clock_ms = clock_ms
        self._owns = owns
        self._rediscover_now = False
        self._security = security
        self._by_topic = {level.topic: level for level in self.levels}
        self.stats = DelayStats(levels={level.name: LevelStats() for level in self.levels})
        #: Delay ids with a pending cancellation (from the cancel topic).
        self.cancelled: set[str] = set()
        #: Set once the first round is consuming (tests wait for it).
        self.ready = anyio.Event()
        #: The levels whose topics exist (as of the last discovery): the only ones a record is moved to.
        self._live_levels: tuple[DelayLevel, ...] = self.levels

    def reassign_soon(self) -> None:
        """Look at which partitions are owned now rather than at the next discovery (a leadership change)."""
        self._rediscover_now = True

    def level_of(self, tp: TopicPartition) -> DelayLevel | None:
        """The level ``tp`` belongs to, None when it is no level partition of this service."""
        return self._by_topic.get(tp.topic)

    def partition_transactional_id(self, tp: TopicPartition) -> str:
        """The transactional id of the producer forwarding ``tp``'s records: the same for every owner of it."""
        return f"{self.transactional_id}-{tp.topic}-{tp.partition}"

    async def run(self) -> None:
        """Forward until cancelled, restarting a failed round from the committed offsets. No error but cancellation
        leaves: inside a broker, a failing service must not stop the broker."""
        while True:
            try:
                await self._round()
            except Exception as exc:
                self.stats.restarts += 1
                if _routine(exc):  # a broker away, a fenced producer: the next round resumes
                    log.warning("delay_service_restart", error="; ".join(_leaves(exc)))
                else:
                    log.exception("delay_service_failed")
            await anyio.sleep(RESTART_BACKOFF_S)

    async def _round(self) -> None:
        async with Admin(self.bootstrap_servers, client_id="oncelog-delay-service", **self._security) as admin:
            topics = await self._wait_for_delay_topics(admin)
            producers: dict[TopicPartition, _PartitionProducer] = {}
            # Each partition's producer lives in a task of its own, so they start and stop in any order.
            async with (
                anyio.create_task_group() as holders,
                Consumer(
                    self.bootstrap_servers,
                    group_id=self.group_id,
                    isolation_level="read_committed",
                    auto_offset_reset="earliest",
                    client_id="oncelog-delay-service",
                    skip_expired=False,
                    **self._security,
                ) as consumer,
            ):
                holders.start_soon(self._create_levels)
                await self._serve(admin, consumer, _Producers(holders, producers), topics)

    async def _serve(self, admin: Admin, consumer: Consumer, producers: _Producers, topics: dict[str, int]) -> None:
        self.cancelled.clear()
        buffers: dict[TopicPartition, PartitionBuffer] = {}
        cancel_tps: list[TopicPartition] = []
        await self._assign(consumer, producers, topics, buffers, cancel_tps)
        self.ready.set()
        rediscover_at = time.monotonic() + DISCOVERY_INTERVAL_S
        wait_ms = 0
        while True:
            if self._rediscover_now or time.monotonic() >= rediscover_at:
                self._rediscover_now = False
                await self._assign(consumer, producers, await admin.list_topics(), buffers, cancel_tps)
                rediscover_at = time.monotonic() + DISCOVERY_INTERVAL_S
            active = [tp for tp, buffer in buffers.items() if not buffer.full] + cancel_tps
            got: dict[TopicPartition, list[ConsumerRecord]] = {}
            if active:
                got = await consumer.getmany(*active, timeout_ms=wait_ms, max_records=MAX_RECORDS_PER_TRANSACTION)
            else:  # every partition paused (getmany() without partitions would fetch them all)
                await anyio.sleep(wait_ms / 1000)
            for tp, records in got.items():
                if tp.topic == CANCEL_TOPIC:
                    self._read_cancellations(records)
                elif tp in buffers and (refetch := buffers[tp].extend(records)) is not None:
                    consumer.seek(tp, refetch)  # past the bound: handed back, fetched again later
            batch, next_due = self._take_due(buffers)
            if batch:
                # One transaction per partition (its own producer), run side by side: their round trips overlap.
                async with anyio.create_task_group() as forwards:
                    for tp, records in batch.items():
                        forwards.start_soon(self._forward, producers.get(tp), consumer, records)
                wait_ms = 0
            else:
                until = IDLE_WAIT_MS if next_due is None else next_due - self._clock_ms()
                wait_ms = max(0, min(until, IDLE_WAIT_MS))
            for tp, buffer in buffers.items():
                self.stats.levels[self._by_topic[tp.topic].name].buffered = len(buffer)

    async def _create_levels(self) -> None:
        """Until every level's topic exists, ask the broker for the missing ones (it creates delay topics on first
        use), every ``DISCOVERY_INTERVAL_S``, each attempt bounded by ``LEVEL_CREATION_WAIT_S``. A level topic first
        wanted for a record's move would be created then, and that fails while brokers are away (it takes the
        cluster's replication factor); so all are made as soon as any is used, and until a level exists no record
        moves to it (``route`` is given the existing levels only)."""
        async with Admin(self.bootstrap_servers, client_id="oncelog-delay-service", **self._security) as admin:
            missing = [level.topic for level in self.levels]
            while missing:
                with anyio.move_on_after(LEVEL_CREATION_WAIT_S), contextlib.suppress(KafkaError, OSError):
                    created = await admin.request_topics(missing)
                    missing = [topic for topic in missing if topic not in created]
                if missing:
                    await anyio.sleep(DISCOVERY_INTERVAL_S)
            self._rediscover_now = True

    async def _wait_for_delay_topics(self, admin: Admin) -> dict[str, int]:
        """The topics once a delay level topic exists. Until a producer first uses one, the service takes no
        resources of the broker: no topics, no transactional id, no group."""
        while True:
            topics = await admin.list_topics()
            if any(topic in self._by_topic for topic in topics):
                return topics
            await anyio.sleep(DISCOVERY_INTERVAL_S)

    async def _assign(
        self,
        consumer: Consumer,
        producers: _Producers,
        topics: dict[str, int],
        buffers: dict[TopicPartition, PartitionBuffer],
        cancel_tps: list[TopicPartition],
    ) -> None:
        """Consume every owned partition of the delay topics in ``topics`` and every cancel partition: those found
        (or owned) since the last call join, each level partition once its producer has fenced the previous owner;
        those no longer owned leave with their buffer and producer; the others keep their positions and buffers.
        A new cancel partition is read to its end first."""
        new_cancel = [
            TopicPartition(CANCEL_TOPIC, p)
            for p in range(topics.get(CANCEL_TOPIC, 0))
            if TopicPartition(CANCEL_TOPIC, p) not in cancel_tps
        ]
        owned = [
            TopicPartition(topic, p)
            for topic in self._by_topic
            for p in range(topics.get(topic, 0))
            if self._owns is None or self._owns(TopicPartition(topic, p))
        ]
        self._live_levels = tuple(level for level in self.levels if topics.get(level.topic, 0) > 0)
        gone = [tp for tp in buffers if tp not in owned]
        new_levels = [tp for tp in owned if tp not in buffers]
        if not new_cancel and not new_levels and not gone:
            return
        for tp in gone:
            del buffers[tp]
            self.stats.levels[self._by_topic[tp.topic].name].buffered = 0
            producers.release(tp)
            log.info("delay_partition_released", topic=tp.topic, partition=tp.partition)
        for tp in new_levels:
            # Initialising the partition's id fences its previous owner before the committed offset is read.
            await producers.open(tp, self._new_producer(tp))
            buffers[tp] = PartitionBuffer(tp, self.max_buffered_records)
            if self._owns is not None:
                log.info("delay_partition_taken", topic=tp.topic, partition=tp.partition)
        cancel_tps.extend(new_cancel)
        consumer.assign([*buffers, *cancel_tps])
        if new_cancel:
            await consumer.seek_to_beginning(*new_cancel)
            await self._catch_up_cancellations(consumer, new_cancel)

    def _new_producer(self, tp: TopicPartition) -> Producer:
        return Producer(
            self.bootstrap_servers,
            transactional_id=self.partition_transactional_id(tp),
            client_id="oncelog-delay-service",
            linger_ms=0,
            **self._security,
        )

    async def _catch_up_cancellations(self, consumer: Consumer, cancel_tps: list[TopicPartition]) -> None:
        """Read the cancel topic up to its end as of now, so no record due now is forwarded past its cancellation."""
        ends = await consumer.list_offsets(cancel_tps, -1)
        while [tp for tp, end in ends.items() if await consumer.position(tp) < end]:
            for records in (await consumer.getmany(*cancel_tps, timeout_ms=IDLE_WAIT_MS)).values():
                self._read_cancellations(records)

    def _read_cancellations(self, records: list[ConsumerRecord]) -> None:
        for record in records:
            if record.key is None:
                continue
            delay_id = record.key.decode(errors="replace")
            if record.value is None:
                self.cancelled.discard(delay_id)
            else:
                self.cancelled.add(delay_id)

    def _take_due(
        self, buffers: dict[TopicPartition, PartitionBuffer]
    ) -> tuple[dict[TopicPartition, list[tuple[ConsumerRecord, Action]]], int | None]:
        """The due head records of every partition (up to a transaction's worth in all) and the earliest next due
        time."""
        now = self._clock_ms()
        batch: dict[TopicPartition, list[tuple[ConsumerRecord, Action]]] = {}
        taken_count = 0
        next_due: int | None = None
        live = self._live_levels
        for tp, buffer in buffers.items():
            level = self._by_topic[tp.topic]
            room = MAX_RECORDS_PER_TRANSACTION - taken_count
            if room <= 0:
                return batch, now
            taken, due = buffer.take_due(lambda r, lv=level: route(r, lv, live, now, self.cancelled), room)
            if taken:
                batch[tp] = taken
                taken_count += len(taken)
            if due is not None and (next_due is None or due < next_due):
                next_due = due
        return batch, next_due

    async def _forward(
        self, producer: Producer, consumer: Consumer, batch: list[tuple[ConsumerRecord, Action]]
    ) -> None:
        """One transaction of ``producer`` (the partition's): every action of ``batch`` and the offsets after its
        records."""
        now = self._clock_ms()
        delivered: list[int] = []
        first = batch[0][0]
        tp = TopicPartition(first.topic, first.partition)
        async with transaction(producer):
            counts = await self._queue(producer, batch, now, delivered)
            # The committed offsets' metadata tells ``oncelog delay stats`` when and how late the last forwards were.
            offset = batch[-1][0].offset + 1
            metadata = commit_metadata(now, max(delivered) if delivered else None)
            await producer.send_offsets_to_transaction(
                {tp: OffsetAndMetadata(offset, metadata)}, consumer.group_metadata()
            )
        self.stats.transactions += 1
        self.stats.lateness_ms.extend(delivered)
        level_stats = self.stats.levels[self._by_topic[tp.topic].name]
        for kind, n in counts.items():
            setattr(level_stats, kind, getattr(level_stats, kind) + n)

    async def _queue(
        self, producer: Producer, batch: list[tuple[ConsumerRecord, Action]], now: int, delivered: list[int]
    ) -> Counter[str]:
        """Queue every action's record in the open transaction; returns how many count under each LevelStats
        counter, and adds each delivery's lateness to ``delivered``.

        First the partition count of every topic written to is looked up (the only awaits: a target that does not
        exist is dead-lettered), then every record is queued in one step of the event loop, all of them on one
        shared future (a failed send fails the transaction, which is all that is read of it)."""
        partitions: dict[str, int | KafkaError] = {}
        for _record, action in batch:
            topic = self._topic_of(action)
            if topic is not None and topic not in partitions:
                partitions[topic] = await self._partition_count(producer, topic, isinstance(action, Deliver))
        needs_dead_letter = self.dead_letter_topic is not None and (
            any(isinstance(action, DeadLetter) for _record, action in batch)
            or any(isinstance(count, KafkaError) for count in partitions.values())
        )
        if needs_dead_letter and self.dead_letter_topic not in partitions:
            assert self.dead_letter_topic is not None
            partitions[self.dead_letter_topic] = await producer.partition_count(self.dead_letter_topic)
        # Nothing is awaited from here on: the producer's state checked once holds for every record below.
        producer.check_sendable()
        shared: Future[RecordMetadata] = Future()
        append = producer.append_checked
        new_record = tuple.__new__
        counts: Counter[str] = Counter()
        for record, action in batch:
            kind = type(action)
            if kind is Deliver:
                assert isinstance(action, Deliver)
                count = partitions[action.target]
                if isinstance(count, KafkaError) or (action.partition is not None and action.partition >= count):
                    error = count if isinstance(count, KafkaError) else f"it has {count} partitions"
                    detail = f"cannot deliver to {action.target} partition {action.partition}: {error}"
                    dead = DeadLetter(REASON_NO_TARGET, detail, record.timestamp)
                    counts[self._dead_letter(append, partitions, shared, record, dead)] += 1
                    continue
                out = new_record(SimpleRecord, (record.key, record.value, action.headers, action.timestamp_ms))
                append(action.target, out, action.partition, count, record_size(out), shared)
                delivered.append(now - action.deliver_at_ms)
                counts["delivered"] += 1
            elif kind is Hop:
                assert isinstance(action, Hop)
                headers = [header for header in record.headers if header[0] != ORIGINAL_TIMESTAMP_HEADER]
                headers.append((ORIGINAL_TIMESTAMP_HEADER, str(action.timestamp_ms).encode()))
                out = new_record(SimpleRecord, (record.key, record.value, headers, now))
                topic = action.level.topic
                append(topic, out, None, partitions[topic], record_size(out), shared)
                counts["moved"] += 1
            elif kind is Cancelled:
                assert isinstance(action, Cancelled)
                self.cancelled.discard(action.delay_id)
                # The cancellation has done its work: a tombstone lets compaction remove it (same transaction).
                out = make_record(None, action.delay_id, None, None)
                append(CANCEL_TOPIC, out, None, partitions[CANCEL_TOPIC], record_size(out), shared)
                counts["cancelled"] += 1
            else:
                assert isinstance(action, DeadLetter)
                counts[self._dead_letter(append, partitions, shared, record, action)] += 1
        return counts

    def _topic_of(self, action: Action) -> str | None:
        """The topic ``action`` writes to (None: the dead-letter topic, or nothing)."""
        if isinstance(action, Deliver):
            return action.target
        if isinstance(action, Hop):
            return action.level.topic
        if isinstance(action, Cancelled):
            return CANCEL_TOPIC
        return None

    @staticmethod
    async def _partition_count(producer: Producer, topic: str, target: bool) -> int | KafkaError:
        """``topic``'s partition count; for a delivery ``target``, the error when it cannot be written to (the
        record is then dead-lettered); any other error raises."""
        try:
            return await producer.partition_count(topic)
        except KafkaError as exc:
            if target and (isinstance(exc, KafkaTimeoutError) or exc.code in _NO_TARGET_CODES):
                return exc
            raise

    def _dead_letter(
        self,
        append: Callable[..., Future[RecordMetadata]],
        partitions: dict[str, int | KafkaError],
        shared: Future[RecordMetadata],
        record: ConsumerRecord,
        action: DeadLetter,
    ) -> str:
        if self.dead_letter_topic is None:
            log.warning(
                "delay_record_dropped", topic=record.topic, partition=record.partition, offset=record.offset,
                reason=action.reason, detail=action.detail,
            )  # fmt: skip
        else:
            headers = dead_letter_headers(record, action.reason, action.detail, timestamp_ms=action.timestamp_ms)
            out = make_record(record.value, record.key, headers, action.timestamp_ms)
            count = partitions[self.dead_letter_topic]
            append(self.dead_letter_topic, out, None, count, record_size(out), shared)
        return "dead_lettered"


def _routine(exc: BaseException) -> bool:
    """A Kafka or connection error (or a group of them only, from side-by-side forwards)."""
    if isinstance(exc, BaseExceptionGroup):
        return all(_routine(inner) for inner in exc.exceptions)
    return isinstance(exc, KafkaError | OSError)


def _leaves(exc: BaseException) -> list[str]:
    """``Type: message`` of ``exc``, or of each exception inside it when it is a group."""
    if isinstance(exc, BaseExceptionGroup):
        return [text for inner in exc.exceptions for text in _leaves(inner)]
    return [f"{type(exc).__name__}: {exc}"]


class _Producers:
    """The level partitions' transactional producers, each started, initialised and closed in a task of its own."""

    def __init__(self, holders: anyio.abc.TaskGroup, held: dict[TopicPartition, _PartitionProducer]) -> None:
        self._holders = holders
        self._held = held

    def get(self, tp: TopicPartition) -> Producer:
        return self._held[tp].producer

    async def open(self, tp: TopicPartition, producer: Producer) -> None:
        """Start ``producer`` and initialise its transactions (raises what they raise)."""
        self._held[tp] = await self._holders.start(_hold, producer)

    def release(self, tp: TopicPartition) -> None:
        """Close ``tp``'s producer (in the background)."""
        if (held := self._held.pop(tp, None)) is not None:
            held.release.set()


@dataclass
class _PartitionProducer:
    producer: Producer
    release: anyio.Event


async def _hold(producer: Producer, *, task_status: anyio.abc.TaskStatus[_PartitionProducer]) -> None:
    """Run ``producer`` until released or cancelled. Closed without flushing: between transactions nothing is queued,
    and an open transaction of a deposed owner is aborted when the next owner initialises the id (or times out)."""
    await producer.start()
    try:
        await producer.init_transactions()
        release = anyio.Event()
        task_status.started(_PartitionProducer(producer, release))
        await release.wait()
    finally:  # no shield around it: close exits the producer's task group, entered above (by start)
        with contextlib.suppress(KafkaError, OSError):
            await producer.close(flush=False)


_NO_TARGET_CODES = frozenset({ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.INVALID_TOPIC_EXCEPTION})
