"""Follower side of replication: one fetcher task per leader broker, fetching every partition this broker follows
from that leader in one Fetch request at a time (Kafka's ReplicaFetcherThread, with ``num.replica.fetchers`` = 1).

Per partition, Kafka's states: *truncating* first (a new leader: ask it with OffsetForLeaderEpoch where this log's
latest epoch ends and cut the divergent tail, KIP-101/279 via ``truncation.truncation_point``; a leader that does not
serve OffsetForLeaderEpoch, or a log without epochs, is cut at its high watermark), then *fetching*: append what the
leader sends keeping its offsets and epochs, take the leader's high watermark (capped by our log end) and log start
offset (records it deleted go here too), and, in fsync
mode, fetch again only once what was appended is durable (so the offset a follower reports, which moves the
leader's high watermark and answers acks=all, is fsynced here too). A partition whose fetch fails is retried after
``replica.fetch.backoff.ms``; a connection that fails is reopened after it. A partition moved to another leader (or
given up) while a response for it was on its way is not touched by that response.

Each connection fetches in an incremental fetch session (KIP-227, ``fetch_session``) when the leader gives one: a
round then lists only the partitions whose position moved, and the answer only those with something new, so a
follower of many idle partitions does not list, encode and decode each of them every round. A session error from
the leader (FETCH_SESSION_ID_NOT_FOUND, INVALID_FETCH_SESSION_EPOCH) restarts the session with a full fetch at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

import anyio
import structlog
import trio
from oncelog.broker.fetch_sessions import MIN_SESSION_VERSION, NO_SESSION_ID
from oncelog.broker.flusher import SyncWaiter
from oncelog.broker.listeners import Endpoint
from oncelog.broker.replication.fetcher_identity import fetcher_client_id
from oncelog.client.connection import BrokerConnection
from oncelog.client.errors import KafkaError
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.storage.leader_epoch import UNDEFINED_EPOCH, EpochEndOffset
from oncelog.storage.log import PartitionLog

from .fetch_session import FollowerSession, Listing, SessionRequest
from .truncation import truncation_point

log = structlog.get_logger(__name__)

#: Kafka's ``replica.fetch.max.bytes`` default: bytes asked per partition.
REPLICA_FETCH_MAX_BYTES = 1_048_576
#: Kafka's ``replica.fetch.response.max.bytes`` default: bytes asked per response.
REPLICA_FETCH_RESPONSE_MAX_BYTES = 10_485_760
#: Kafka's ``replica.fetch.wait.max.ms`` default: how long the leader may park a fetch with nothing new.
REPLICA_FETCH_WAIT_MAX_MS = 500
#: Kafka's ``replica.fetch.min.bytes`` default.
REPLICA_FETCH_MIN_BYTES = 1
#: Kafka's ``replica.fetch.backoff.ms`` default: the pause after a failed fetch or connection.
REPLICA_FETCH_BACKOFF_MS = 1_000
#: The pause after an answer that says leadership is changing under us (NOT_LEADER_OR_FOLLOWER, UNKNOWN_LEADER_EPOCH,
#: FENCED_LEADER_EPOCH): every broker applies a new leader from etcd on its own, so the leader named to this follower
#: may apply it a few milliseconds later. A whole replica.fetch.backoff.ms would hold the high watermark (and acks=all
#: producers) for a second after each leadership change.
LEADERSHIP_CHANGE_BACKOFF_MS = 50
#: Errors that mean the follower and the leader have not applied the same partition state yet.
LEADERSHIP_CHANGING = frozenset(
    {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.FENCED_LEADER_EPOCH}
)
#: The Fetch version followers send: the newest that still names topics (13+ name them by id) and has ReplicaId.
FETCH_VERSION = 12
#: The OffsetForLeaderEpoch versions a follower can send (v3+ carry the ReplicaId).
OFFSET_FOR_LEADER_EPOCH_VERSIONS = (3, 4)
#: The shortest pause of a fetcher with nothing to fetch (so an unfinished truncation cannot spin).
MIN_IDLE_S = 0.01
#: Top-level answers that end the fetch session (the next fetch asks in full), not the connection.
SESSION_ERRORS = frozenset({ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.INVALID_FETCH_SESSION_EPOCH})


@dataclass(frozen=True)
class FetcherSettings:
    max_bytes: int = REPLICA_FETCH_MAX_BYTES
    response_max_bytes: int = REPLICA_FETCH_RESPONSE_MAX_BYTES
    wait_max_ms: int = REPLICA_FETCH_WAIT_MAX_MS
    min_bytes: int = REPLICA_FETCH_MIN_BYTES
    backoff_ms: int = REPLICA_FETCH_BACKOFF_MS


class FollowerLogs(Protocol):
    """What a fetcher needs of the local partitions (``ReplicaManager`` provides it)."""

    def get_log(self, topic: str, partition: int) -> PartitionLog | None: ...

    def append_as_follower(self, topic: str, partition: int, records: bytes | memoryview, now_ms: int) -> Any: ...

    def follower_high_watermark(self, topic: str, partition: int, leader_high_watermark: int) -> None: ...

    def truncate_follower(self, topic: str, partition: int, offset: int) -> None: ...

    def restart_follower_at(self, topic: str, partition: int, offset: int) -> None: ...

    def follower_log_start_offset(self, topic: str, partition: int, leader_log_start_offset: int) -> None: ...

    def request_durable(self, topic: str, partition: int, end_offset: int) -> SyncWaiter | None: ...

    async def wait_requested(self, waiter: SyncWaiter | None) -> ErrorCode: ...


@dataclass(eq=False)
class FollowedPartition:
    """One partition fetched from a leader, under the leader epoch it was handed over with."""

    topic: str
    partition: int
    leader_epoch: int
    truncating: bool = True
    #: trio time before which the partition is not fetched (after an error).
    delayed_until: float = 0.0


class ReplicaFetcher:
    """Fetches the partitions this broker follows from one leader broker; ``run`` until cancelled."""

    def __init__(
        self,
        leader: int,
        *,
        node_id: int,
        endpoint_of: Callable[[int], Endpoint | None],
        local: FollowerLogs,
        settings: FetcherSettings,
        clock_ms: Callable[[], int],
        on_leader_lost: Callable[[int], None] | None = None,
        client_id: Callable[[], str] | None = None,
    ) -> None:
        """``on_leader_lost(leader)`` is told when the connection to the leader fails (a cluster member checks
        whether the leader's process is gone: ``broker.cluster.liveness``); ``client_id()`` is what each new
        connection is named (``ReplicaFetcherManager.client_id``; Kafka's fetcher form if None)."""
        self.leader = leader
        self._node_id = node_id
        self._client_id = client_id or (lambda: fetcher_client_id(node_id, leader, 0))
        self._on_leader_lost = on_leader_lost
        self._endpoint_of = endpoint_of
        self._local = local
        self._settings = settings
        self._clock_ms = clock_ms
        self.partitions: dict[tuple[str, int], FollowedPartition] = {}
        #: The partitions not fetched now: truncating, or waiting out an error (``delayed_until``).
        self._held_back: set[tuple[str, int]] = set()
        #: Each partition fetched now, with its listing as last computed: what the next fetch asks for.
        self._listings: dict[tuple[str, int], Listing] = {}
        #: The partitions whose listing may have changed since (answered, handed over, released, their log start
        #: raised here): computed again before the next fetch, so a round costs what changed.
        self._stale: set[tuple[str, int]] = set()
        self._changed = trio.Event()
        #: Fetch responses handled (tests and logs use it to see progress).
        self.rounds = 0

    def add(self, topic: str, partition: int, leader_epoch: int) -> None:
        tp = (topic, partition)
        self.partitions[tp] = FollowedPartition(topic, partition, leader_epoch)
        self._hold_back(tp)
        self._changed.set()

    def remove(self, topic: str, partition: int) -> None:
        tp = (topic, partition)
        self.partitions.pop(tp, None)
        self._held_back.discard(tp)
        self._stale.add(tp)
        self._changed.set()

    def listing_changed(self, topic: str, partition: int) -> None:
        """The partition's log start moved here (retention): the next fetch lists it again."""
        if (topic, partition) in self.partitions:
            self._stale.add((topic, partition))

    def _hold_back(self, tp: tuple[str, int]) -> None:
        """Stop fetching ``tp`` (truncating, or delayed) until ``_release_held_back`` finds it ready."""
        self._held_back.add(tp)
        self._stale.add(tp)

    async def run(self) -> None:
        backoff_s = self._settings.backoff_ms / 1000
        while True:
            while not self.partitions:
                await self._changed.wait()
                self._changed = trio.Event()
            endpoint = self._endpoint_of(self.leader)
            if endpoint is None:
                log.info("replica_fetcher_no_endpoint", leader=self.leader)
                await trio.sleep(backoff_s)
                continue
            failure: BaseException | None = None
            try:
                async with anyio.create_task_group() as connection_tasks:
                    connection = BrokerConnection(
                        endpoint.host,
                        endpoint.port,
                        node_id=self.leader,
                        client_id=self._client_id(),
                        max_in_flight=1,
                    )
                    await connection.open(connection_tasks)
                    try:
                        await self._fetch_loop(connection, FollowerSession())
                    finally:
                        await connection.aclose()
            except* (KafkaError, OSError) as group:  # the connection's task group wraps what it raises
                failure = group.exceptions[0]
            if failure is not None:
                log.info("replica_fetcher_error", leader=self.leader, error=str(failure))
                if self._on_leader_lost is not None:
                    self._on_leader_lost(self.leader)
                await trio.sleep(backoff_s)

    async def _fetch_loop(self, connection: BrokerConnection, session: FollowerSession) -> None:
        """Fetch over ``connection`` (a session with the leader lasts as long as it does) until nothing is
        followed."""
        while True:
            if not self.partitions:
                return
            await self._truncate(connection)
            now = trio.current_time()
            self._release_held_back(now)
            changed = self._refresh_listings()
            if not self._listings:
                # Every partition waits out an error (or its truncation asks again): sleep until the first is due.
                self._stale |= changed  # the next fetch's session forgets those that left
                held_back = (self.partitions[tp] for tp in self._held_back if tp in self.partitions)
                until = min((p.delayed_until for p in held_back), default=now)
                with trio.move_on_at(max(until, now + MIN_IDLE_S)):
                    await self._changed.wait()
                self._changed = trio.Event()
                continue
            await self._fetch(connection, session, changed)

    def _release_held_back(self, now: float) -> None:
        """Fetch again the partitions held back that are neither truncating nor delayed any more."""
        for tp in list(self._held_back):
            followed = self.partitions.get(tp)
            if followed is None:
                self._held_back.discard(tp)
            elif not followed.truncating and followed.delayed_until <= now:
                self._held_back.discard(tp)
                self._stale.add(tp)

    def _refresh_listings(self) -> set[tuple[str, int]]:
        """Compute the listings of the stale partitions again (dropping those no longer fetched); returns them."""
        changed, self._stale = self._stale, set()
        gone = []
        for tp in changed:
            followed = self.partitions.get(tp)
            partition_log = None
            if followed is not None and tp not in self._held_back:
                partition_log = self._local.get_log(*tp)
                if partition_log is None:
                    gone.append(tp)  # the log was deleted here
            if followed is None or partition_log is None:
                self._listings.pop(tp, None)
                continue
            self._listings[tp] = (
                partition_log.log_end_offset,
                partition_log.log_start_offset,
                followed.leader_epoch,
                self._settings.max_bytes,
            )
        for topic, partition in gone:
            self.remove(topic, partition)
        self._stale.clear()  # only what ``remove`` marked, in ``changed`` already
        return changed

    # Truncation ----------------------------------------------------------------------------------------------

    async def _truncate(self, connection: BrokerConnection) -> None:
        """Cut every partition still truncating, asking the leader where our epochs end when it can answer."""
        now = trio.current_time()
        held_back = (self.partitions.get(tp) for tp in self._held_back)
        pending = [p for p in held_back if p is not None and p.truncating and p.delayed_until <= now]
        supported = connection.broker_versions.get(ApiKey.OFFSET_FOR_LEADER_EPOCH)
        for _round in range(64):  # each round resolves at least one epoch per partition (KIP-279)
            if not pending:
                return
            asking = []
            for followed in pending:
                partition_log = self._local.get_log(followed.topic, followed.partition)
                if partition_log is None:
                    self.remove(followed.topic, followed.partition)
                    continue
                cache = partition_log.leader_epoch_cache
                if supported is None or cache.latest_epoch == UNDEFINED_EPOCH:
                    # Kafka's fallback for a leader or a log without epochs: cut at the high watermark.
                    self._local.truncate_follower(followed.topic, followed.partition, partition_log.high_watermark)
                    followed.truncating = False
                else:
                    asking.append((followed, partition_log, cache))
            if not asking:
                return
            answers = await self._offsets_for_epochs(connection, supported, asking)
            pending = []
            for followed, partition_log, cache in asking:
                if self.partitions.get((followed.topic, followed.partition)) is not followed:
                    continue  # handed over again meanwhile
                answer = answers.get((followed.topic, followed.partition))
                if answer is None or answer[0] != ErrorCode.NONE:
                    followed.delayed_until = trio.current_time() + self._backoff_s(answer[0] if answer else None)
                    continue
                cut = truncation_point(
                    cache,
                    log_end_offset=partition_log.log_end_offset,
                    high_watermark=partition_log.high_watermark,
                    leader_answer=answer[1],
                )
                self._local.truncate_follower(followed.topic, followed.partition, cut.offset)
                if cut.complete:
                    followed.truncating = False
                else:
                    pending.append(followed)

    async def _offsets_for_epochs(
        self, connection: BrokerConnection, supported: tuple[int, int], asking: list
    ) -> dict[tuple[str, int], tuple[ErrorCode, EpochEndOffset]]:
        version = min(supported[1], OFFSET_FOR_LEADER_EPOCH_VERSIONS[1])
        if version < OFFSET_FOR_LEADER_EPOCH_VERSIONS[0]:
            version = supported[1]
        topics: dict[str, list[dict]] = {}
        for followed, _log, cache in asking:
            topics.setdefault(followed.topic, []).append(
                {
                    "partition": followed.partition,
                    "current_leader_epoch": followed.leader_epoch,
                    "leader_epoch": cache.latest_epoch,
                }
            )
        body = {
            "replica_id": self._node_id,
            "topics": [{"topic": topic, "partitions": partitions} for topic, partitions in topics.items()],
        }
        response = await connection.request(ApiKey.OFFSET_FOR_LEADER_EPOCH, body, version=version)
        answers = {}
        for topic in response.topics:
            for p in topic.partitions:
                answers[(topic.topic, p.partition)] = (
                    ErrorCode(p.error_code),
                    EpochEndOffset(p.leader_epoch, p.end_offset),
                )
        return answers

    # Fetching ------------------------------------------------------------------------------------------------

    async def _fetch(
        self, connection: BrokerConnection, session: FollowerSession, changed: set[tuple[str, int]]
    ) -> None:
        """One round: ask for every partition fetched now (in a session, listing only those of ``changed`` whose
        listing moved) and handle the answer."""
        wanted = self._listings  # unchanged until the answer is handled: only this task changes it
        sent = session.request(wanted, changed)
        version = min(FETCH_VERSION, connection.broker_versions.get(ApiKey.FETCH, (0, FETCH_VERSION))[1])
        try:
            response = await connection.request(
                ApiKey.FETCH,
                self._fetch_body(sent, wanted),
                version=version,
                timeout_ms=connection.request_timeout_ms + self._settings.wait_max_ms,
            )
        except BaseException:
            session.reset()  # the leader may or may not have applied it
            raise
        self.rounds += 1
        if response.error_code != ErrorCode.NONE:
            session.reset()
            if response.error_code in SESSION_ERRORS:
                log.info("replica_fetch_session_reset", leader=self.leader, error=ErrorCode(response.error_code).name)
                return
            raise KafkaError(f"fetch from broker {self.leader} failed", ErrorCode(response.error_code))
        session.answered(sent, wanted, response.session_id if version >= MIN_SESSION_VERSION else NO_SESSION_ID)
        waits: list[SyncWaiter] = []
        now_ms = self._clock_ms()
        for topic in response.responses:
            for answer in topic.partitions:
                tp = (topic.topic, answer.partition_index)
                followed = self.partitions.get(tp)
                if tp not in wanted or followed is None or followed.truncating:
                    continue  # not asked, or handed over while the answer was on its way (a new one truncates)
                self._stale.add(tp)  # its log end or log start may move, or it is held back
                waiter = self._handle(followed, answer, now_ms)
                if waiter is not None:
                    waits.append(waiter)
        for waiter in waits:
            await self._local.wait_requested(waiter)

    def _fetch_body(self, sent: SessionRequest, wanted: dict[tuple[str, int], Listing]) -> dict:
        topics: dict[str, list[dict]] = {}
        for topic, partition in sent.listed:
            fetch_offset, log_start_offset, leader_epoch, max_bytes = wanted[(topic, partition)]
            topics.setdefault(topic, []).append(
                {
                    "partition": partition,
                    "current_leader_epoch": leader_epoch,
                    "fetch_offset": fetch_offset,
                    "last_fetched_epoch": -1,
                    "log_start_offset": log_start_offset,
                    "partition_max_bytes": max_bytes,
                }
            )
        forgotten: dict[str, list[int]] = {}
        for topic, partition in sent.forgotten:
            forgotten.setdefault(topic, []).append(partition)
        return {
            "replica_id": self._node_id,
            "max_wait_ms": self._settings.wait_max_ms,
            "min_bytes": self._settings.min_bytes,
            "max_bytes": self._settings.response_max_bytes,
            "isolation_level": 0,
            "session_id": sent.session_id,
            "session_epoch": sent.epoch,
            "topics": [{"topic": topic, "partitions": partitions} for topic, partitions in topics.items()],
            "forgotten_topics_data": [{"topic": t, "partitions": ps} for t, ps in forgotten.items()],
            "rack_id": "",
        }

    def _backoff_s(self, error: ErrorCode | None) -> float:
        """How long a partition waits after ``error`` (None: no answer for it)."""
        if error in LEADERSHIP_CHANGING:
            return min(LEADERSHIP_CHANGE_BACKOFF_MS, self._settings.backoff_ms) / 1000
        return self._settings.backoff_ms / 1000

    def _handle(self, followed: FollowedPartition, answer: Any, now_ms: int) -> SyncWaiter | None:
        topic, partition = followed.topic, followed.partition
        error = ErrorCode(answer.error_code)
        if error == ErrorCode.OFFSET_OUT_OF_RANGE:
            partition_log = self._local.get_log(topic, partition)
            log.info("replica_fetch_out_of_range", topic=topic, partition=partition, leader=self.leader)
            if partition_log is not None and answer.log_start_offset > partition_log.log_end_offset:
                # The leader's log starts above ours ends (retention, DeleteRecords): start over from there.
                self._local.restart_follower_at(topic, partition, answer.log_start_offset)
            else:
                followed.truncating = True  # our end is beyond the leader's: find where the logs diverge again
                self._hold_back((topic, partition))
            return None
        if error != ErrorCode.NONE:
            log.info("replica_fetch_error", topic=topic, partition=partition, leader=self.leader, error=error.name)
            followed.delayed_until = trio.current_time() + self._backoff_s(error)
            self._hold_back((topic, partition))
            return None
        records = answer.records
        if records:
            appended = self._local.append_as_follower(topic, partition, records, now_ms)
            if appended.error != ErrorCode.NONE:
                followed.delayed_until = trio.current_time() + self._settings.backoff_ms / 1000
                self._hold_back((topic, partition))
                return None
        self._local.follower_high_watermark(topic, partition, answer.high_watermark)
        self._local.follower_log_start_offset(topic, partition, answer.log_start_offset)
        partition_log = self._local.get_log(topic, partition)
        if not records or partition_log is None:
            return None
        return self._local.request_durable(topic, partition, partition_log.log_end_offset)


class ReplicaFetcherManager:
    """The fetchers of this broker, one per leader it follows partitions of; implements ``FollowerFetchers``.
    ``run`` in the node's nursery; fetchers start and stop as partitions are followed and given up."""

    def __init__(
        self,
        *,
        node_id: int,
        endpoint_of: Callable[[int], Endpoint | None],
        local: FollowerLogs,
        settings: FetcherSettings,
        clock_ms: Callable[[], int],
        on_leader_lost: Callable[[int], None] | None = None,
        incarnation: Callable[[], int] = lambda: 0,
    ) -> None:
        """``incarnation()``: this broker's registration lease now (0 without etcd), which the fetchers' client ids
        name so that leaders do not ration their requests (``fetcher_identity``)."""
        self._node_id = node_id
        self._incarnation = incarnation
        self._endpoint_of = endpoint_of
        self._local = local
        self._settings = settings
        self._clock_ms = clock_ms
        self._on_leader_lost = on_leader_lost
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self._scopes: dict[int, trio.CancelScope] = {}
        self._nursery: trio.Nursery | None = None
        self._leader_of: dict[tuple[str, int], int] = {}

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            for fetcher in self.fetchers.values():
                self._start(fetcher)
            task_status.started()
            await trio.sleep_forever()

    def client_id(self, leader: int) -> str:
        """The client id this broker's fetcher from ``leader`` connects with now (``fetcher_identity``)."""
        return fetcher_client_id(self._node_id, leader, self._incarnation())

    def follow(self, topic: str, partition: int, leader: int, leader_epoch: int) -> None:
        self.unfollow(topic, partition)
        fetcher = self.fetchers.get(leader)
        if fetcher is None:
            fetcher = self.fetchers[leader] = ReplicaFetcher(
                leader,
                node_id=self._node_id,
                endpoint_of=self._endpoint_of,
                local=self._local,
                settings=self._settings,
                clock_ms=self._clock_ms,
                on_leader_lost=self._on_leader_lost,
                client_id=partial(self.client_id, leader),
            )
            if self._nursery is not None:
                self._start(fetcher)
        fetcher.add(topic, partition, leader_epoch)
        self._leader_of[(topic, partition)] = leader

    def listing_changed(self, topic: str, partition: int) -> None:
        """The log start of a partition followed here moved (retention): its fetcher lists it again."""
        leader = self._leader_of.get((topic, partition))
        fetcher = self.fetchers.get(leader) if leader is not None else None
        if fetcher is not None:
            fetcher.listing_changed(topic, partition)

    def unfollow(self, topic: str, partition: int) -> None:
        leader = self._leader_of.pop((topic, partition), None)
        fetcher = self.fetchers.get(leader) if leader is not None else None
        if fetcher is None:
            return
        fetcher.remove(topic, partition)
        if not fetcher.partitions:
            del self.fetchers[fetcher.leader]
            scope = self._scopes.pop(fetcher.leader, None)
            if scope is not None:
                scope.cancel()

    def _start(self, fetcher: ReplicaFetcher) -> None:
        assert self._nursery is not None
        scope = trio.CancelScope()
        self._scopes[fetcher.leader] = scope

        async def fetch() -> None:
            with scope:
                await fetcher.run()

        self._nursery.start_soon(fetch)
