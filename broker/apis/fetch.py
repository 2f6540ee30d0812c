"""Fetch (1): whole batches up to the high watermark (read_uncommitted) or the last stable offset (read_committed),
with long polling on ``max_wait_ms`` / ``min_bytes`` and Kafka's ``max_bytes`` / ``partition_max_bytes`` limits.

Bounded as Kafka bounds it: the records of a response total at most the request's ``max_bytes`` and the broker's
``fetch.max.bytes`` (beyond them only the first batch of the first partition with data, KIP-74); a partition
listed more than once is read and answered once; a parked fetch watches each partition once, and ends when its
client goes away.

A fetch with a ``replica_id`` >= 0 (v0-14 ReplicaId, v15+ ReplicaState) is a follower's: it reads up to the log end
rather than the high watermark, notes the follower's progress (which moves the high watermark and the ISR), and
parks until new data is appended (``ReplicaManager.read_for_follower``). A consumer's fetch of a partition this node
does not lead is answered NOT_LEADER_OR_FOLLOWER.

A partition's current_leader_epoch (v9+, KIP-320) is checked before it is read (``ReplicaManager.check_leader_epoch``):
FENCED_LEADER_EPOCH or UNKNOWN_LEADER_EPOCH, with no records and offsets -1, as Kafka answers.

Topic ids (v13+, KIP-516): the request names topics by id, resolved through the metadata; an id no topic has (the topic
was deleted, or recreated under a new id) is answered UNKNOWN_TOPIC_ID for each of its partitions. A topic deleted and
recreated under the same name while the fetch was parked answers INCONSISTENT_TOPIC_ID (Kafka's partition topic id
check in ReplicaManager.readFromLog), never the new topic's records under the old id.

Incremental fetch sessions (KIP-227) are given to followers only (``broker.fetch_sessions``): a consumer's fetch is
answered in full, session id 0, holding every requested partition, which all clients accept (kafka-python included,
which asks for a session and falls back), as they accept a broker whose session slots are all taken.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio
from oncelog.broker.clock import now_ms
from oncelog.broker.fetch_sessions import (
    INITIAL_EPOCH,
    MAX_NAMED_SESSION_VERSION,
    MIN_SESSION_VERSION,
    NO_SESSION_ID,
    SESSIONLESS_EPOCH,
    FetchSession,
    next_epoch,
)
from oncelog.broker.fetch_wait import FetchWaiter, bytes_between
from oncelog.broker.replica_manager import READ_COMMITTED, FollowerIdleMark, PartitionRead
from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode
from oncelog.protocol.records.batch import holds_codec
from oncelog.protocol.records.compression import Compression

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

NO_PREFERRED_REPLICA = -1
#: The first Fetch version whose client can read zstd-compressed batches (KIP-110).
MIN_ZSTD_VERSION = 10
#: Upper bound on a long poll, whatever the client asks (Kafka caps it by request.timeout on the client side).
MAX_WAIT_CAP_MS = 60_000


#: A parked fetch watches for its client going away only when it would wait longer than this: a shorter one (a
#: follower's, at ``replica.fetch.wait.max.ms`` 500) ends by itself about as soon, without a task started per park.
WATCH_DISCONNECT_AFTER_S = 1.0
#: Partitions read between two checkpoints of a Fetch, so one listing many partitions does not hold the loop.
PARTITIONS_PER_CHECKPOINT = 256
#: Kafka's FetchRequest.CONSUMER_REPLICA_ID: a consumer's fetch (a follower's carries its broker id, >= 0).
CONSUMER_REPLICA_ID = -1
#: The first Fetch version carrying the follower's id in ReplicaState (KIP-903) instead of ReplicaId.
MIN_REPLICA_STATE_VERSION = 15
#: The first Fetch version naming topics by id instead of by name (KIP-516).
MIN_TOPIC_ID_VERSION = 13


def replica_id(request: Request) -> int:
    """The fetching follower's broker id, or a negative id for a consumer."""
    if request.version >= MIN_REPLICA_STATE_VERSION:
        state = request.body.replica_state
        return CONSUMER_REPLICA_ID if state is None else state.replica_id
    return request.body.replica_id


def requested_partitions(body) -> dict[str, dict[int, object]]:
    """The request's partitions by topic, each once: a partition listed again takes the later listing's fetch
    position but keeps its first place, as Kafka's FetchRequest builds its LinkedHashMap of partitions."""
    wanted: dict[str, dict[int, object]] = {}
    for topic_request in body.topics:
        per_topic = wanted.setdefault(topic_request["topic"], {})
        # Item access: a decoded struct's attribute access costs ten times more, too much for 100,000 partitions.
        per_topic.update({partition["partition"]: partition for partition in topic_request["partitions"]})
    return wanted


def merge_listings(version: int, body) -> None:
    """Reduce the request in place to each topic once with each of its partitions once, in the order and with the
    positions ``requested_partitions`` gives (topics by id from v13, by name before). Pure; the server runs it in the
    worker thread that decoded a large request, so a request listing a partition 20,000 times is merged, and its
    listings freed, off the event loop."""
    key = "topic_id" if version >= MIN_TOPIC_ID_VERSION else "topic"
    merged: dict[object, tuple[object, dict[int, object]]] = {}
    for topic_request in body.topics:
        entry = merged.get(topic_request[key])
        if entry is None:
            entry = merged[topic_request[key]] = (topic_request, {})
        entry[1].update({partition["partition"]: partition for partition in topic_request["partitions"]})
    topics = []
    for topic_request, partitions in merged.values():
        topic_request["partitions"] = list(partitions.values())
        topics.append(topic_request)
    body.topics[:] = topics


@dataclass
class TopicIds:
    """How a v13+ request's topic ids resolved: the known ones by topic name, and the partitions asked of ids no
    topic has (each once, in the request's order)."""

    by_name: dict[str, uuid.UUID]
    unknown: dict[uuid.UUID, dict[int, None]]


def requested_by_id(broker: Broker, body) -> tuple[dict[str, dict[int, object]], TopicIds]:
    """``requested_partitions`` of a request naming topics by id, with the ids resolved through the metadata."""
    wanted: dict[str, dict[int, object]] = {}
    ids = TopicIds({}, {})
    for topic_request in body.topics:
        topic_id = topic_request["topic_id"]
        topic = broker.metadata.by_id(topic_id)
        if topic is None:
            ids.unknown.setdefault(topic_id, {}).update(
                dict.fromkeys(p["partition"] for p in topic_request["partitions"])
            )
            continue
        ids.by_name[topic.name] = topic_id
        per_topic = wanted.setdefault(topic.name, {})
        per_topic.update({partition["partition"]: partition for partition in topic_request["partitions"]})
    return wanted, ids


def max_response_bytes(broker: Broker, request: Request) -> int:
    """Record bytes the response may carry: the request's max_bytes (v3+) within the broker's fetch.max.bytes."""
    asked = request.body.max_bytes if request.version >= 3 else 2**31 - 1
    return min(asked, broker.config.get_int("fetch.max.bytes"))


async def _read_all(
    broker: Broker,
    request: Request,
    wanted: dict[str, dict[int, object]],
    ids: TopicIds | None,
    marks: dict[tuple[str, int], FollowerIdleMark] | None = None,
    timestamp: int | None = None,
) -> tuple[list[tuple[str, list[tuple[int, PartitionRead]]]], int]:
    """Each partition's read (at ``timestamp``, ms, by default now), and the record bytes read in all. A
    follower's fetch adds to ``marks`` the partitions it finds idle (``ReplicaManager.follower_idle_mark``)."""
    remaining = max_response_bytes(broker, request)
    hold = request.response_hold
    if hold is not None:
        # Only what the broker's budget of unsent responses has free (at least the first batch all the same).
        hold.release()
        remaining = hold.take(remaining)
    isolation = request.body.isolation_level
    follower = replica_id(request)
    timestamp = now_ms() if timestamp is None else timestamp
    total = 0
    results = []
    read_since_checkpoint = 0
    for name, partitions in wanted.items():
        topic = broker.metadata.get(name)
        per_partition = []
        for index, partition_request in partitions.items():
            if topic is None or not 0 <= index < topic.partitions:
                read = PartitionRead(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
            elif ids is not None and topic.topic_id != ids.by_name[name]:
                read = PartitionRead(ErrorCode.INCONSISTENT_TOPIC_ID)  # recreated since the id was resolved
            else:
                offset = partition_request.fetch_offset  # type: ignore[attr-defined]
                read_since_checkpoint += 1
                if read_since_checkpoint >= PARTITIONS_PER_CHECKPOINT:
                    read_since_checkpoint = 0
                    await trio.lowlevel.checkpoint()
                epoch_error = broker.replicas.check_leader_epoch(
                    name,
                    index,
                    partition_request["current_leader_epoch"],  # type: ignore[index]
                )
                if epoch_error != ErrorCode.NONE:
                    per_partition.append((index, PartitionRead(epoch_error)))
                    continue
                # The first batch of the response is returned whole even above the limits (Kafka's
                # minOneMessage, KIP-74), so a consumer always makes progress.
                limit = min(partition_request.partition_max_bytes, max(remaining, 0))  # type: ignore[attr-defined]
                if follower >= 0:
                    read = broker.replicas.read_for_follower(
                        name, index, follower, offset, limit, timestamp, min_one_batch=total == 0
                    )
                    if marks is not None and (mark := broker.replicas.follower_idle_mark(name, index, offset, read)):
                        marks[(name, index)] = mark
                else:
                    read = broker.replicas.read(
                        name,
                        index,
                        offset,
                        limit,
                        isolation,
                        min_one_batch=total == 0,
                    )
                if request.version < MIN_ZSTD_VERSION and holds_codec(read.records, Compression.ZSTD):
                    # Such a client cannot decode zstd (KIP-110): Kafka answers this instead of the records.
                    read = PartitionRead(ErrorCode.UNSUPPORTED_COMPRESSION_TYPE)
                remaining -= len(read.records)
                total += len(read.records)
            per_partition.append((index, read))
        results.append((name, per_partition))
    if hold is not None:
        hold.settle(total)
    return results, total


def _partition_response(index: int, read: PartitionRead, isolation: int) -> dict:
    return {
        "partition_index": index,
        "error_code": read.error,
        "high_watermark": read.high_watermark,
        "last_stable_offset": read.last_stable_offset,
        "log_start_offset": read.log_start_offset,
        "aborted_transactions": (
            [{"producer_id": pid, "first_offset": first} for pid, first in read.aborted_transactions]
            if isolation == READ_COMMITTED
            else None
        ),
        "preferred_read_replica": NO_PREFERRED_REPLICA,
        "records": read.records,
    }


def _session_answer(
    session: FetchSession, results: list[tuple[str, list[tuple[int, PartitionRead]]]], *, incremental: bool
) -> list[tuple[str, list[tuple[int, PartitionRead]]]]:
    """The partitions a session's answer carries (all of them when it opens; else the changed ones), noting what
    the follower is told."""
    answer = []
    for name, per_partition in results:
        carried = [
            (index, read)
            for index, read in per_partition
            if session.changed(
                name,
                index,
                read.error,
                len(read.records),
                (read.high_watermark, read.last_stable_offset, read.log_start_offset),
            )
            or not incremental
        ]
        if carried:
            answer.append((name, carried))
    return answer


def _response(
    results: list[tuple[str, list[tuple[int, PartitionRead]]]],
    isolation: int,
    ids: TopicIds | None,
    session_id: int = NO_SESSION_ID,
) -> dict:
    responses = [
        {
            "topic": name,
            "topic_id": ids.by_name[name] if ids is not None else None,
            "partitions": [_partition_response(i, r, isolation) for i, r in per_partition],
        }
        for name, per_partition in results
    ]
    if ids is not None:
        unknown = PartitionRead(ErrorCode.UNKNOWN_TOPIC_ID)
        responses.extend(
            {
                "topic": "",
                "topic_id": topic_id,
                "partitions": [_partition_response(i, unknown, isolation) for i in asked],
            }
            for topic_id, asked in ids.unknown.items()
        )
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "session_id": session_id,
        "responses": responses,
    }


def _session_error(error: ErrorCode) -> dict:
    return {"throttle_time_ms": 0, "error_code": error, "session_id": NO_SESSION_ID, "responses": []}


def _forgotten(body) -> list[tuple[str, int]]:
    return [(topic["topic"], index) for topic in body.forgotten_topics_data or () for index in topic["partitions"]]


def _follower_session(
    broker: Broker, request: Request, follower: int, wanted: dict[str, dict[int, object]]
) -> tuple[FetchSession | None, bool] | ErrorCode:
    """A follower's fetch under KIP-227: (its session or None, whether the fetch is incremental), or the error
    that answers it. An incremental fetch's listings are applied to its session."""
    body = request.body
    sessions = broker.fetch_sessions
    session_id, epoch = body.session_id, body.session_epoch
    if epoch in (INITIAL_EPOCH, SESSIONLESS_EPOCH):
        if session_id != NO_SESSION_ID:
            sessions.close(session_id)
        if epoch == SESSIONLESS_EPOCH or not broker.replicas.has_follower(follower):
            return None, False
        return sessions.open(follower, wanted), False
    session = sessions.get(session_id)
    if session is None or session.replica != follower:
        return ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    if epoch != session.epoch:
        return ErrorCode.INVALID_FETCH_SESSION_EPOCH
    forgotten = _forgotten(body)
    listed = [(name, index) for name, partitions in wanted.items() for index in partitions]
    broker.replicas.wake_idle(session, [*listed, *forgotten])  # a position that moved, or a partition left
    session.update(wanted, forgotten)
    session.epoch = next_epoch(epoch)
    return session, True


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    follower = replica_id(request)
    with_session = follower >= 0 and MIN_SESSION_VERSION <= request.version <= MAX_NAMED_SESSION_VERSION
    if request.version >= MIN_SESSION_VERSION and body.session_id != NO_SESSION_ID and not with_session:
        return _session_error(ErrorCode.FETCH_SESSION_ID_NOT_FOUND)
    if request.version >= MIN_TOPIC_ID_VERSION:
        wanted, ids = requested_by_id(broker, body)
    else:
        wanted, ids = requested_partitions(body), None
    # The merged partitions are all that is kept: a fetch parked for long does not hold every listing.
    body.topics.clear()
    session, incremental = None, False
    if with_session:
        outcome = _follower_session(broker, request, follower, wanted)
        if isinstance(outcome, ErrorCode):
            return _session_error(outcome)
        session, incremental = outcome
        if session is not None:
            broker.replicas.wake_if_reregistered(session)
            wanted = _awake(session)
    watched = [(name, index) for name, partitions in wanted.items() for index in partitions]
    deadline = trio.current_time() + min(max(body.max_wait_ms, 0), MAX_WAIT_CAP_MS) / 1000
    marks: dict[tuple[str, int], FollowerIdleMark] | None = {} if session is not None else None
    read_ms = now_ms()
    results, total = await _read_all(broker, request, wanted, ids, marks, read_ms)
    has_error = ids is not None and bool(ids.unknown)
    has_error = has_error or any(read.error != ErrorCode.NONE for _, reads in results for _, read in reads)
    may_wake = watched or (session is not None and session.asleep)
    if total < body.min_bytes and not has_error and trio.current_time() < deadline and may_wake:
        await _park(broker, request, wanted, watched, deadline, session)
        if session is not None:
            wanted = _awake(session)  # with the partitions woken while it was parked
            assert marks is not None
            marks.clear()  # only the marks of the read that is answered: the first read's answer is never sent
        read_ms = now_ms()
        results, total = await _read_all(broker, request, wanted, ids, marks, read_ms)
    if session is None:
        return _response(results, body.isolation_level, ids)
    if broker.fetch_sessions.get(session.session_id) is not session:
        # Closed or replaced (a newer fetch of the follower) while this one was parked: answer it in full.
        results, _total = await _read_all(broker, request, session.partitions, ids)
        return _response(results, body.isolation_level, ids)
    answer = _session_answer(session, results, incremental=incremental)
    assert marks is not None
    session.last_read_ms = read_ms
    broker.replicas.sleep_idle(session, marks)
    return _response(answer, body.isolation_level, ids, session.session_id)


def _awake(session: FetchSession) -> dict[str, dict[int, object]]:
    """What a round of ``session`` reads: its partitions awake, as they are now (parks and reads yield, and the
    session's partitions wake meanwhile)."""
    return {name: dict(partitions) for name, partitions in session.awake.items()}


def _visible_bytes(
    broker: Broker, request: Request, wanted: dict[str, dict[int, object]], starts: dict[tuple[int, int], int]
) -> int:
    """What the fetch would read now, estimated from positions as Kafka's DelayedFetch estimates it (a follower's up
    to the log end); a partition whose fetch offset is out of range, or no longer led here, counts as enough (the
    read answers its error at once)."""
    follower = replica_id(request) >= 0
    total = 0
    for name, partitions in wanted.items():
        for index, partition_request in partitions.items():
            partition_log = broker.replicas.get_log(name, index)
            if partition_log is None:
                continue
            start = partition_request["fetch_offset"]  # type: ignore[index]
            if not partition_log.log_start_offset <= start <= partition_log.log_end_offset:
                return 2**31
            if not broker.replicas.leads(name, index):
                return 2**31  # leadership moved while parked: answer NOT_LEADER_OR_FOLLOWER now
            if follower:
                end = partition_log.log_end_offset
            elif request.body.isolation_level == READ_COMMITTED:
                end = partition_log.last_stable_offset
            else:
                end = partition_log.high_watermark
            if start < end:
                if request.body.min_bytes <= 1:
                    return 1  # any batch is enough (a follower's fetch, most consumers'): no need to measure it
                total += bytes_between(partition_log, start, end, starts)
    return total


async def _park(
    broker: Broker,
    request: Request,
    wanted: dict[str, dict[int, object]],
    watched: list[tuple[str, int]],
    deadline: float,
    session: FetchSession | None = None,
) -> None:
    """Wait until the deadline, or until ``min_bytes`` are visible from the fetch positions (``_visible_bytes``).
    A consumer's fetch is woken only once its partitions' high watermark advances may have made them visible
    (``broker.fetch_wait``), so a produce costs it an addition; a follower's at every append, and a follower's
    session fetch (which watches only its partitions awake) also when one of its partitions asleep wakes. Either
    then looks at the batch positions of its distinct partitions, not a read. A client gone away cancels its parked
    fetch with its connection when the fetch would wait longer than ``WATCH_DISCONNECT_AFTER_S``."""
    starts: dict[tuple[int, int], int] = {}
    follower = replica_id(request) >= 0
    committed = request.body.isolation_level == READ_COMMITTED

    async def until_visible() -> None:
        nonlocal wanted, watched
        while (visible := _visible_bytes(broker, request, wanted, starts)) < request.body.min_bytes:
            waiter = FetchWaiter(request.body.min_bytes - visible, committed=committed)
            broker.replicas.watch(watched, waiter, replica=follower)
            if session is not None:
                session.parked = waiter
            try:
                await waiter.event.wait()
            finally:
                broker.replicas.unwatch(watched, waiter, replica=follower)
                if session is not None and session.parked is waiter:
                    session.parked = None
            if session is not None:  # with the partitions woken meanwhile
                wanted = _awake(session)
                watched = [(name, index) for name, partitions in wanted.items() for index in partitions]

    with trio.move_on_at(deadline):
        if request.watch_disconnect is None or deadline - trio.current_time() <= WATCH_DISCONNECT_AFTER_S:
            await until_visible()
            return
        async with trio.open_nursery() as nursery:
            nursery.start_soon(request.watch_disconnect)
            await until_visible()
            nursery.cancel_scope.cancel()
