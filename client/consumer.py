"""The async consumer: manual assignment, fetch with isolation level, seek/position, offsets of a group.

Guarantees: ``getmany`` returns each partition's records in offset order, never a control record, and with
read_committed never a record of an aborted or still-open transaction (the broker caps fetches at the last stable
offset). A partition without a position starts from its committed offset (when a group is set and the broker has
OffsetFetch), else per auto.offset.reset. OFFSET_OUT_OF_RANGE resets per auto.offset.reset.
"""

from __future__ import annotations

import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any

import anyio
from oncelog.client.assignors import ASSIGNORS
from oncelog.client.cluster import COORDINATOR_GROUP, Cluster
from oncelog.client.dead_letter import REASON_TTL, dead_letter_headers
from oncelog.client.errors import ConfigError, IllegalStateError, KafkaError, error_for
from oncelog.client.expiry import ExpiryFilter
from oncelog.client.fetch_parse import Selected, decode_selected, select_batches
from oncelog.client.group import HEARTBEAT_INTERVAL_MS, MAX_POLL_INTERVAL_MS, SESSION_TIMEOUT_MS, GroupMember
from oncelog.client.producer import Producer
from oncelog.client.record_decode import decoder
from oncelog.client.security import connection_security
from oncelog.client.types import ConsumerRecord, GroupMetadata, OffsetAndMetadata, TopicPartition
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import InvalidBatchError

FETCH_MAX_WAIT_MS = 500  # fetch.max.wait.ms, Kafka default 500
FETCH_MIN_BYTES = 1  # fetch.min.bytes, Kafka default 1
FETCH_MAX_BYTES = 52428800  # fetch.max.bytes, Kafka default 52428800
MAX_PARTITION_FETCH_BYTES = 1048576  # max.partition.fetch.bytes, Kafka default 1048576
MAX_POLL_RECORDS = 500  # max.poll.records, Kafka default 500
AUTO_COMMIT_INTERVAL_MS = 5000  # auto.commit.interval.ms, Kafka default 5000
EARLIEST_TIMESTAMP = -2  # ListOffsets: the log start offset
LATEST_TIMESTAMP = -1  # ListOffsets: the log end offset (the LSO for read_committed)
_ISOLATION = {"read_uncommitted": 0, "read_committed": 1}
_RESET = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "none": None}
_REFRESH_ON = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)


class _Fetched:
    """One partition's fetched records not yet returned: batches still undecoded, then decoded records read from
    ``start`` on. Batches are decoded only as records are taken, so records live from decoding to the caller
    (a whole fetch decoded at once outlived the garbage collector's young generations and made every full
    collection walk it: more than half the consumer's CPU). Taking k records costs O(k) whatever the buffer holds
    (the sync iterator takes them one at a time).

    A batch that fails to decode stays at the head: the records before it are handed out first, then every take
    raises InvalidBatchError until a seek moves past it, as Kafka's consumer raises on every poll until then.
    """

    __slots__ = ("batches", "keep", "records", "start", "tp")

    def __init__(
        self, tp: TopicPartition, keep: Callable[[list[ConsumerRecord]], list[ConsumerRecord]] | None = None
    ) -> None:
        """``keep`` filters each decoded batch's records (the consumer drops those past their time-to-live)."""
        self.tp = tp
        self.keep = keep
        self.batches: deque[Selected] = deque()
        self.records: list[ConsumerRecord] = []
        self.start = 0

    def _fill(self, wanted: int) -> int:
        """Decode batches until ``wanted`` records are ready or none is left; how many are ready."""
        ready = len(self.records) - self.start
        while ready < wanted and self.batches:
            try:
                decoded = list(decode_selected(self.tp, self.batches[0]))
                if self.keep is not None:
                    decoded = self.keep(decoded)
            except InvalidBatchError:
                if ready:
                    break  # hand out the records before it first; the next take raises
                raise
            self.batches.popleft()
            if self.start:
                del self.records[: self.start]
                self.start = 0
            self.records.extend(decoded)
            ready += len(decoded)
        return ready

    def __bool__(self) -> bool:
        return self._fill(1) > 0

    def next_offset(self) -> int:
        """Offset of the first record not yet taken (the buffer must not be empty)."""
        self._fill(1)
        return self.records[self.start].offset

    def take_one(self) -> ConsumerRecord:
        """The oldest record (the buffer must not be empty)."""
        self._fill(1)
        record = self.records[self.start]
        self.start += 1
        return record

    def take(self, limit: int) -> list[ConsumerRecord]:
        """Up to ``limit`` records, oldest first."""
        self._fill(limit)
        start = self.start
        chunk = self.records[start : start + limit]
        self.start = start + len(chunk)
        return chunk

    def add(self, batches: list[Selected]) -> None:
        self.batches.extend(batches)


class Consumer:
    """``async with Consumer("host:port", isolation_level="read_committed") as c: c.assign([...])``."""

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        *,
        group_id: str | None = None,
        isolation_level: str = "read_uncommitted",
        auto_offset_reset: str = "latest",
        enable_auto_commit: bool = False,
        auto_commit_interval_ms: int = AUTO_COMMIT_INTERVAL_MS,
        fetch_max_wait_ms: int = FETCH_MAX_WAIT_MS,
        fetch_min_bytes: int = FETCH_MIN_BYTES,
        fetch_max_bytes: int = FETCH_MAX_BYTES,
        max_partition_fetch_bytes: int = MAX_PARTITION_FETCH_BYTES,
        max_poll_records: int = MAX_POLL_RECORDS,
        request_timeout_ms: int = 30000,
        client_id: str = "oncelog-consumer",
        partition_assignment_strategy: Sequence[str] = ("range", "roundrobin"),
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS,
        max_poll_interval_ms: int = MAX_POLL_INTERVAL_MS,
        skip_expired: bool = True,
        default_ttl_ms: Mapping[str, int] | None = None,
        dead_letter_topic: str | None = None,
        **security: Any,
    ) -> None:
        """``security``: security_protocol with the ssl_* and sasl_* settings of ``client.security``.

        TTL: unless ``skip_expired`` is False, records past their ``oncelog-ttl-ms`` header (else past
        ``default_ttl_ms[topic]``) are not returned; with ``dead_letter_topic`` they are written there (with the
        ``oncelog-dead-letter-reason: ttl-expired`` and ``kafka_dlt-*`` headers) before ``getmany`` returns, so an
        offset committed after it never covers an expired record not yet dead-lettered (at least once: a crash
        between the two may write one twice)."""
        connection = connection_security(**security)
        if isolation_level not in _ISOLATION:
            raise ConfigError(f"isolation.level must be read_uncommitted or read_committed; got {isolation_level!r}")
        if auto_offset_reset not in _RESET:
            raise ConfigError(f"auto.offset.reset must be earliest, latest or none; got {auto_offset_reset!r}")
        if enable_auto_commit and group_id is None:
            raise ConfigError("enable.auto.commit=true requires group.id")
        if max_poll_records < 1:
            raise ConfigError("max.poll.records must be at least 1")
        unknown = [a for a in partition_assignment_strategy if a not in ASSIGNORS]
        if unknown or not partition_assignment_strategy:
            raise ConfigError(f"partition.assignment.strategy must name range and/or roundrobin; got {unknown}")
        if heartbeat_interval_ms >= session_timeout_ms:
            raise ConfigError("heartbeat.interval.ms must be lower than session.timeout.ms")
        self.group_id = group_id
        self.isolation = _ISOLATION[isolation_level]
        self.auto_offset_reset = auto_offset_reset
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_s = auto_commit_interval_ms / 1000
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.max_poll_records = max_poll_records
        self._expiry = ExpiryFilter(default_ttl_ms) if skip_expired else None
        self.dead_letter_topic = dead_letter_topic
        self._expired: list[ConsumerRecord] = []
        self._dead_letters: Producer | None = None
        self._bootstrap_servers = bootstrap_servers
        self._security = security
        self._cluster = Cluster(
            bootstrap_servers, client_id=client_id, request_timeout_ms=request_timeout_ms, security=connection
        )
        self._assignment: list[TopicPartition] = []
        self._fetch_pos: dict[TopicPartition, int] = {}
        self._buffer: dict[TopicPartition, _Fetched] = {}
        # The background fetch (at most one fetch in flight, as Kafka's fetcher per node): set when it ends; what it
        # brought waits in _completed, as (partition, position fetched at, batches, next position), until a call
        # moves it into the buffers (the sync facade reads the buffers from its own thread between calls).
        self._prefetch_done: anyio.Event | None = None
        self._completed: list[tuple[TopicPartition, int, list[Selected], int]] = []
        self._last_auto_commit = time.monotonic()
        self._started = False
        self._closed = False
        self._subscription: list[str] = []
        self._member: GroupMember | None = None
        if group_id is not None:
            self._member = GroupMember(
                self._cluster,
                group_id,
                assignors=partition_assignment_strategy,
                session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=heartbeat_interval_ms,
                rebalance_timeout_ms=max_poll_interval_ms,
            )

    @property
    def generation_id(self) -> int:
        return self._member.generation_id if self._member is not None and self._subscription else -1

    @property
    def member_id(self) -> str:
        return self._member.member_id if self._member is not None and self._subscription else ""

    async def __aenter__(self) -> Consumer:
        await self.start()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    async def start(self) -> None:
        if not self._started:
            await self._cluster.__aenter__()
            self._started = True
            try:
                await self._cluster.any_connection()
                # Choose the record decoder now, off the event loop: the compiled one imports aiokafka (about 0.1 s,
                # once per process), which would otherwise delay the first fetch.
                await anyio.to_thread.run_sync(decoder)
            except BaseException:
                await self.close()
                raise

    async def close(self) -> None:
        if self._started and not self._closed:
            self._closed = True
            try:
                if self.enable_auto_commit and self._assignment:
                    with anyio.move_on_after(5):
                        await self.commit()
                if self._member is not None and self._subscription:
                    await self._member.leave()
            finally:
                try:
                    if self._dead_letters is not None:
                        await self._dead_letters.close()
                finally:
                    await self._cluster.__aexit__(None, None, None)
        self._closed = True

    # --- assignment and positions -------------------------------------------------------------------------

    def subscribe(self, topics: Iterable[str]) -> None:
        """Join the group (classic protocol) for ``topics``; partitions are assigned by the group's leader at the
        next ``getmany``."""
        if self._member is None:
            raise ConfigError("subscribe requires group.id")
        self._subscription = sorted(set(topics))
        self._member.need_rejoin = True

    def subscription(self) -> set[str]:
        return set(self._subscription)

    async def _ensure_group(self) -> None:
        member = self._member
        if member is None or not self._subscription or not member.need_rejoin:
            return
        if self.enable_auto_commit and self._assignment and member.generation_id >= 0:
            with contextlib.suppress(KafkaError):
                await self.commit()
        if await member.ensure_active(self._subscription):
            self._set_assignment(member.assignment)

    def assign(self, partitions: Iterable[TopicPartition]) -> None:
        """Consume exactly ``partitions`` (replacing the previous assignment); not with :meth:`subscribe`."""
        if self._subscription:
            raise IllegalStateError("assign cannot be combined with subscribe")
        self._set_assignment(partitions)

    def _set_assignment(self, partitions: Iterable[TopicPartition]) -> None:
        new = list(dict.fromkeys(TopicPartition(*tp) for tp in partitions))
        for tp in set(self._assignment) - set(new):
            self._fetch_pos.pop(tp, None)
            self._buffer.pop(tp, None)
        self._assignment = new

    def assignment(self) -> set[TopicPartition]:
        return set(self._assignment)

    def _check_assigned(self, tp: TopicPartition) -> None:
        if tp not in self._assignment:
            raise IllegalStateError(f"{tp} is not assigned to this consumer")

    def seek(self, tp: TopicPartition, offset: int) -> None:
        """The next record returned for ``tp`` will be at ``offset``."""
        self._check_assigned(tp)
        self._fetch_pos[tp] = offset
        self._buffer.pop(tp, None)

    async def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        await self._reset(list(partitions) or self._assignment, EARLIEST_TIMESTAMP)

    async def seek_to_end(self, *partitions: TopicPartition) -> None:
        await self._reset(list(partitions) or self._assignment, LATEST_TIMESTAMP)

    async def position(self, tp: TopicPartition) -> int:
        """Offset of the next record ``getmany`` returns for ``tp``."""
        self._check_assigned(tp)
        buffered = self._buffer.get(tp)
        if buffered:
            return buffered.next_offset()
        await self._ensure_positions([tp])
        return self._fetch_pos[tp]

    def group_metadata(self) -> GroupMetadata:
        """What :meth:`Producer.send_offsets_to_transaction` needs to commit this consumer's offsets."""
        if self.group_id is None:
            raise ConfigError("group_metadata requires group.id")
        return GroupMetadata(self.group_id, self.generation_id, self.member_id, None)

    async def list_offsets(self, partitions: Iterable[TopicPartition], timestamp: int) -> dict[TopicPartition, int]:
        """ListOffsets at ``timestamp`` (-2 earliest, -1 latest/LSO) with this consumer's isolation level."""
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            by_node.setdefault(await self._cluster.leader_for(tp), []).append(tp)
        out: dict[TopicPartition, int] = {}
        for node, tps in by_node.items():
            topics: dict[str, list[dict[str, Any]]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "timestamp": timestamp})
            body = {
                "replica_id": -1,
                "isolation_level": self.isolation,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            }
            resp = await self._cluster.request(node, ApiKey.LIST_OFFSETS, body)
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code:
                        if p.error_code in _REFRESH_ON:
                            self._cluster.invalidate()
                        raise error_for(p.error_code, f"ListOffsets {t.name}-{p.partition_index}")
                    out[TopicPartition(t.name, p.partition_index)] = p.offset
        return out

    async def _reset(self, partitions: list[TopicPartition], timestamp: int | None) -> None:
        if timestamp is None:
            raise KafkaError(
                f"no committed offset for {partitions} and auto.offset.reset=none", ErrorCode.OFFSET_OUT_OF_RANGE
            )
        for tp in partitions:
            self._check_assigned(tp)
        for tp, offset in (await self.list_offsets(partitions, timestamp)).items():
            self._fetch_pos[tp] = offset
            self._buffer.pop(tp, None)

    async def _ensure_positions(self, partitions: Iterable[TopicPartition]) -> None:
        missing = [tp for tp in partitions if tp not in self._fetch_pos]
        if not missing:
            return
        if self.group_id is not None and self._cluster_supports(ApiKey.OFFSET_FETCH):
            for tp, om in (await self.committed_many(missing)).items():
                if om is not None:
                    self._fetch_pos[tp] = om.offset
            missing = [tp for tp in missing if tp not in self._fetch_pos]
        if missing:
            await self._reset(missing, _RESET[self.auto_offset_reset])

    def _cluster_supports(self, key: ApiKey) -> bool:
        return any(key in conn.versions for conn in self._cluster._conns.values())

    # --- fetching -----------------------------------------------------------------------------------------

    async def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        """Records of the assigned ``partitions`` (all when none given), waiting up to ``timeout_ms`` for some."""
        if not self._started or self._closed:
            raise IllegalStateError("the consumer is not started")
        await self._ensure_group()
        wanted = list(partitions) or list(self._assignment)
        limit = max_records or self.max_poll_records
        deadline = time.monotonic() + timeout_ms / 1000
        await self._maybe_auto_commit()
        while True:
            self._apply_completed()
            out = self._drain(wanted, limit)
            await self._dead_letter_expired()  # the records past their TTL that draining skipped
            if out:
                self._prefetch(wanted)
                return out
            if not wanted:  # nothing assigned (yet): wait for a rebalance
                await anyio.sleep(min(0.1, max(0.0, deadline - time.monotonic())))
                await self._ensure_group()
                wanted = list(partitions) or list(self._assignment)
                if time.monotonic() >= deadline:
                    return {}
                continue
            remaining = deadline - time.monotonic()
            await self._fetch(wanted, max(0, min(int(remaining * 1000), self.fetch_max_wait_ms)))
            out = self._drain(wanted, limit)
            await self._dead_letter_expired()
            if out:
                self._prefetch(wanted)
            if out or time.monotonic() >= deadline:
                return out

    async def getmany_batches(self, tp: TopicPartition, *, timeout_ms: int = 0) -> list[Selected]:
        """The fetched data batches of ``tp``, not decoded, waiting up to ``timeout_ms`` for some; the position moves
        past them. For callers that decode whole batches into columns themselves (the Spark source builds Arrow
        columns from them, ``oncelog.pipeline.columns``).

        The batches are what ``fetch_parse.select_batches`` kept: CRC checked, never a control batch, with
        read_committed never a batch of an aborted transaction; each carries its fetch position, and records before it
        (the first batch of a fetch may start earlier) are the caller's to drop, as are records past their TTL (no
        expiry filter runs here). Raises IllegalStateError when :meth:`getmany` left decoded records of ``tp``."""
        if not self._started or self._closed:
            raise IllegalStateError("the consumer is not started")
        self._check_assigned(tp)
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            self._apply_completed()
            out = self._take_batches(tp)
            if out:
                self._prefetch([tp])
                return out
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return out
            await self._fetch([tp], max(0, min(int(remaining * 1000), self.fetch_max_wait_ms)))

    def _take_batches(self, tp: TopicPartition) -> list[Selected]:
        buffered = self._buffer.get(tp)
        if buffered is None:
            return []
        if buffered.start < len(buffered.records):
            raise IllegalStateError(f"getmany left decoded records of {tp}: take them with getmany")
        out = list(buffered.batches)
        buffered.batches.clear()
        return out

    async def getone(self) -> ConsumerRecord:
        """The next record of any assigned partition (waits as long as it takes)."""
        while True:
            batch = await self.getmany(timeout_ms=self.fetch_max_wait_ms, max_records=1)
            for records in batch.values():
                return records[0]

    def take_buffered(self) -> ConsumerRecord | None:
        """The next record of the assigned partitions already fetched (no I/O, no waiting), as ``getmany`` would
        return it first, or None when none is buffered; the position of its partition moves past it. The sync
        facade's iterator calls it from its caller's thread: the event loop touches the fetch buffer only inside calls,
        never between them."""
        if not self._started or self._closed:
            raise IllegalStateError("the consumer is not started")
        buffers = self._buffer
        for tp in self._assignment:
            buffered = buffers.get(tp)
            if buffered:
                return buffered.take_one()
        return None

    def __aiter__(self) -> AsyncIterator[ConsumerRecord]:
        return self._iterate()

    async def _iterate(self) -> AsyncIterator[ConsumerRecord]:
        while True:
            yield await self.getone()

    def _drain(self, wanted: list[TopicPartition], limit: int) -> dict[TopicPartition, list[ConsumerRecord]]:
        out: dict[TopicPartition, list[ConsumerRecord]] = {}
        for tp in wanted:
            buffered = self._buffer.get(tp)
            if buffered and limit > 0:
                out[tp] = taken = buffered.take(limit)
                limit -= len(taken)
        return out

    async def _fetch(self, wanted: list[TopicPartition], max_wait_ms: int) -> None:
        if self._prefetch_done is not None:  # one fetch at a time: wait for the background one, take what it brought
            with anyio.move_on_after(max_wait_ms / 1000):
                await self._prefetch_done.wait()
            self._apply_completed()
            return
        todo = [tp for tp in wanted if not self._buffer.get(tp)]
        if not todo:
            return
        await self._ensure_positions(todo)
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in todo:
            by_node.setdefault(await self._cluster.leader_for(tp), []).append(tp)
        errors: list[BaseException] = []

        async def one(node: int, tps: list[TopicPartition]) -> None:
            try:
                await self._fetch_from(node, tps, max_wait_ms)
            except KafkaError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            for node, tps in by_node.items():
                tg.start_soon(one, node, tps)
        if errors and not any(self._buffer.get(tp) for tp in todo):
            self._cluster.invalidate()
            await anyio.sleep(self._cluster.retry_backoff_ms / 1000)

    def _prefetch(self, wanted: list[TopicPartition]) -> None:
        """Start fetching, in the background, the partitions of ``wanted`` whose buffer is now empty, so that the
        broker serves the next records while the caller works through these (Kafka's consumer does the same). The
        background fetch takes what the broker has at once and never waits for more."""
        if self._prefetch_done is not None:
            return
        positions = {tp: self._fetch_pos[tp] for tp in wanted if not self._buffer.get(tp) and tp in self._fetch_pos}
        if positions:
            self._prefetch_done = done = anyio.Event()
            self._cluster.task_group.start_soon(self._prefetch_run, positions, done)

    async def _prefetch_run(self, positions: dict[TopicPartition, int], done: anyio.Event) -> None:
        try:
            by_node: dict[int, dict[TopicPartition, int]] = {}
            for tp, position in positions.items():
                by_node.setdefault(await self._cluster.leader_for(tp), {})[tp] = position
            async with anyio.create_task_group() as tg:
                for node, node_positions in by_node.items():
                    tg.start_soon(self._prefetch_from, node, node_positions)
        except Exception:
            pass  # whatever failed here fails the next fetch of these partitions in the foreground, which handles it
        finally:
            self._prefetch_done = None
            done.set()

    async def _prefetch_from(self, node: int, positions: dict[TopicPartition, int]) -> None:
        """One background Fetch: the records of each partition answered without error go to ``_completed``."""
        # max_wait_ms=0: a partition at its end must not park this fetch at the broker, as the foreground fetches of
        # the other partitions wait for it; waiting for new records is the foreground fetch's job.
        resp = await self._fetch_request(node, positions, 0)
        if resp.error_code:
            return
        for t in resp.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                position = positions.get(tp)
                if position is None or p.error_code:
                    continue  # an error is left to the foreground fetch
                batches, next_pos = select_batches(
                    p.records,
                    position,
                    read_committed=self.isolation == 1,
                    aborted_transactions=p.aborted_transactions,
                )
                self._completed.append((tp, position, batches, next_pos))

    def _apply_completed(self) -> None:
        """Move what the background fetch brought into the buffers, unless its partition moved since (a seek, a
        reset, another fetch, a new assignment)."""
        if not self._completed:
            return
        completed, self._completed = self._completed, []
        for tp, position, batches, next_pos in completed:
            if self._fetch_pos.get(tp) != position:
                continue
            self._fetch_pos[tp] = next_pos
            if batches:
                self._buffer.setdefault(tp, _Fetched(tp)).add(batches)

    async def _fetch_request(self, node: int, positions: Mapping[TopicPartition, int], max_wait_ms: int) -> Any:
        """Send one Fetch for ``positions`` to ``node``; the decoded response."""
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, position in positions.items():
            topics.setdefault(tp.topic, []).append(
                {
                    "partition": tp.partition,
                    "fetch_offset": position,
                    "partition_max_bytes": self.max_partition_fetch_bytes,
                }
            )
        body = {
            "replica_id": -1,
            "max_wait_ms": max_wait_ms,
            "min_bytes": self.fetch_min_bytes,
            "max_bytes": self.fetch_max_bytes,
            "isolation_level": self.isolation,
            "session_id": 0,
            "session_epoch": -1,
            "topics": [{"topic": t, "partitions": ps} for t, ps in topics.items()],
            "forgotten_topics_data": [],
            "rack_id": "",
        }
        return await self._cluster.request(node, ApiKey.FETCH, body)

    async def _fetch_from(self, node: int, tps: list[TopicPartition], max_wait_ms: int) -> None:
        positions = {tp: self._fetch_pos[tp] for tp in tps}
        resp = await self._fetch_request(node, positions, max_wait_ms)
        if resp.error_code:
            raise error_for(resp.error_code, "Fetch")
        reset: list[TopicPartition] = []
        for t in resp.responses:
            for p in t.partitions:
                tp = TopicPartition(t.topic, p.partition_index)
                if tp not in positions or self._fetch_pos.get(tp) != positions[tp]:
                    continue  # sought elsewhere while the fetch was in flight
                if p.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
                    reset.append(tp)
                    continue
                if p.error_code:
                    if p.error_code in _REFRESH_ON:
                        self._cluster.invalidate()
                        continue
                    raise error_for(p.error_code, f"Fetch {tp.topic}-{tp.partition}")
                batches, next_pos = select_batches(
                    p.records,
                    positions[tp],
                    read_committed=self.isolation == 1,
                    aborted_transactions=p.aborted_transactions,
                )
                self._fetch_pos[tp] = next_pos
                if batches:
                    self._buffer.setdefault(tp, _Fetched(tp, self._live)).add(batches)
        if reset:
            for tp in reset:
                self._fetch_pos.pop(tp, None)
            await self._reset(reset, _RESET[self.auto_offset_reset])

    def _live(self, records: list[ConsumerRecord]) -> list[ConsumerRecord]:
        """``records`` without those past their time-to-live, which are kept for the dead-letter topic if any."""
        if self._expiry is None:
            return records
        records, gone = self._expiry.split(records, int(time.time() * 1000))
        if gone and self.dead_letter_topic is not None:
            self._expired.extend(gone)
        return records

    async def _dead_letter_expired(self) -> None:
        """Write the expired records fetched so far to the dead-letter topic and wait for their acknowledgement."""
        if not self._expired or self.dead_letter_topic is None:
            return
        if self._dead_letters is None:
            self._dead_letters = Producer(self._bootstrap_servers, client_id="oncelog-dead-letters", **self._security)
            await self._dead_letters.start()
        now = int(time.time() * 1000)
        futures = []
        for record in self._expired:
            message = f"{record.topic}: past its time-to-live at {now}"
            headers = dead_letter_headers(record, REASON_TTL, message, group_id=self.group_id)
            futures.append(
                await self._dead_letters.send(
                    self.dead_letter_topic, record.value, record.key, headers=headers, timestamp_ms=record.timestamp
                )
            )
        await self._dead_letters.flush()
        for future in futures:
            await future
        self._expired.clear()

    # --- committed offsets (OffsetCommit / OffsetFetch, once the broker has consumer groups) -------------

    def _group(self) -> str:
        if self.group_id is None:
            raise ConfigError("committing or fetching offsets requires group.id")
        return self.group_id

    async def commit(self, offsets: Mapping[TopicPartition, int | OffsetAndMetadata] | None = None) -> None:
        """Commit ``offsets`` (default: the current positions of every assigned partition) to the group."""
        group = self._group()
        if offsets is None:
            offsets = {tp: await self.position(tp) for tp in self._assignment if tp in self._fetch_pos}
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, value in offsets.items():
            om = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(int(value))
            topics.setdefault(tp.topic, []).append(
                {
                    "partition_index": tp.partition,
                    "committed_offset": om.offset,
                    "committed_leader_epoch": om.leader_epoch,
                    "committed_metadata": om.metadata or "",
                }
            )
        body = {
            "group_id": group,
            "generation_id_or_member_epoch": self.generation_id,
            "member_id": self.member_id,
            "group_instance_id": None,
            "retention_time_ms": -1,
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
        }
        resp = await self._group_request(ApiKey.OFFSET_COMMIT, body)
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    if self._member is not None and self._subscription:
                        self._member.on_commit_error(p.error_code)
                    raise error_for(p.error_code, f"OffsetCommit {t.name}-{p.partition_index}")
        self._last_auto_commit = time.monotonic()

    async def committed(self, tp: TopicPartition) -> int | None:
        """The group's committed offset of ``tp`` (None when nothing is committed)."""
        om = (await self.committed_many([tp])).get(tp)
        return om.offset if om is not None else None

    async def committed_many(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        group = self._group()
        topics: dict[str, list[int]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append(tp.partition)
        body = {
            "group_id": group,
            "require_stable": True,
            "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
        }
        resp = await self._group_request(ApiKey.OFFSET_FETCH, body)
        if getattr(resp, "error_code", 0):
            raise error_for(resp.error_code, "OffsetFetch")
        out: dict[TopicPartition, OffsetAndMetadata | None] = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    raise error_for(p.error_code, f"OffsetFetch {t.name}-{p.partition_index}")
                tp = TopicPartition(t.name, p.partition_index)
                out[tp] = (
                    OffsetAndMetadata(p.committed_offset, p.metadata, p.committed_leader_epoch)
                    if p.committed_offset >= 0
                    else None
                )
        return out

    async def _group_request(self, key: ApiKey, body: Mapping[str, Any]) -> Any:
        group = self._group()
        deadline = time.monotonic() + self._cluster.request_timeout_ms / 1000
        while True:
            node = await self._cluster.coordinator(COORDINATOR_GROUP, group)
            resp = await self._cluster.request(node, key, body)
            codes = {getattr(resp, "error_code", 0)}
            codes |= {p.error_code for t in resp.topics for p in t.partitions}
            if codes & {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}:
                self._cluster.forget_coordinator(COORDINATOR_GROUP, group)
            elif not codes & {ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, ErrorCode.UNSTABLE_OFFSET_COMMIT}:
                return resp
            if time.monotonic() > deadline:
                return resp
            await anyio.sleep(self._cluster.retry_backoff_ms / 1000)

    async def _maybe_auto_commit(self) -> None:
        if self.enable_auto_commit and time.monotonic() - self._last_auto_commit >= self.auto_commit_interval_s:
            self._last_auto_commit = time.monotonic()
            if self._fetch_pos:
                await self.commit()

    # --- metadata helpers ---------------------------------------------------------------------------------

    async def partitions_for_topic(self, topic: str) -> list[TopicPartition]:
        info = await self._cluster.topic(topic)
        return [TopicPartition(topic, p) for p in sorted(info.leaders)]
