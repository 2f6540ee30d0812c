"""Incremental fetch sessions (KIP-227) for followers: the leader's cache (``broker.fetch_sessions``), the follower's
half (``broker.replication.fetch_session``), and both on the wire: a leader in-process, this test speaking as its
follower 2 (followers 2 and 3 are not running), and a three-node cluster whose leader drops its sessions."""

from __future__ import annotations

import collections
import dataclasses

import trio
from oncelog.broker.clock import now_ms
from oncelog.broker.fetch_sessions import FetchSessions, next_epoch
from oncelog.broker.replication.fetch_session import FollowerSession
from oncelog.protocol import ApiKey, ErrorCode

from broker.helpers import batch, produce_body
from broker.replication.test_data_path import TOPIC, connect, end_offset, led_by, log_bytes, produce, until

FETCH_VERSION = 12
PARTITIONS = 4


# --- the leader's cache, pure --------------------------------------------------------------------------------


def test_epochs_count_from_one_and_wrap_past_the_largest_int32_to_one() -> None:
    assert next_epoch(0) == 1
    assert next_epoch(1) == 2
    assert next_epoch(2**31 - 1) == 1


def test_a_follower_holds_one_session_and_slots_bound_them_all() -> None:
    sessions = FetchSessions(slots=2)
    first = sessions.open(2, {"t": {0: "p0"}})
    assert first is not None and sessions.get(first.session_id) is first
    again = sessions.open(2, {"t": {1: "p1"}})
    assert again is not None and sessions.get(first.session_id) is None  # replaced, not added
    assert sessions.open(3, {}) is not None
    assert sessions.open(4, {}) is None  # both slots taken by other followers
    assert len(sessions) == 2
    sessions.close(again.session_id)
    assert sessions.open(4, {}) is not None
    assert FetchSessions(slots=0).open(2, {}) is None  # max.incremental.fetch.session.cache.slots=0: off


def test_a_session_forgets_and_updates_listings_and_tells_only_what_changed() -> None:
    session = FetchSessions().open(2, {"t": {0: "a", 1: "b"}, "u": {0: "c"}})
    assert session is not None
    session.update({"t": {1: "b2"}, "v": {0: "d"}}, [("u", 0), ("t", 9)])
    assert session.partitions == {"t": {0: "a", 1: "b2"}, "v": {0: "d"}}
    assert session.changed("t", 0, ErrorCode.NONE, 0, (5, 5, 0))  # first answer
    assert not session.changed("t", 0, ErrorCode.NONE, 0, (5, 5, 0))  # nothing new
    assert session.changed("t", 0, ErrorCode.NONE, 100, (5, 5, 0))  # records
    assert session.changed("t", 0, ErrorCode.NONE, 0, (6, 5, 0))  # high watermark
    assert session.changed("t", 0, ErrorCode.NOT_LEADER_OR_FOLLOWER, 0, (6, 5, 0))
    assert session.changed("t", 0, ErrorCode.NONE, 0, (6, 5, 0))  # after an error: again, though unchanged


# --- the follower's half, pure -------------------------------------------------------------------------------


def test_a_follower_lists_everything_until_a_session_opens_then_only_what_moved() -> None:
    session = FollowerSession()
    wanted = {("t", 0): (10, 0, 1, 100), ("t", 1): (20, 0, 1, 100)}
    full = session.request(wanted)
    assert (full.session_id, full.epoch, full.listed, full.forgotten) == (0, 0, [("t", 0), ("t", 1)], [])
    session.answered(full, wanted, session_id=0)  # the leader gave none: ask in full again
    assert session.request(wanted) == full
    session.answered(full, wanted, session_id=7)
    assert session.request(wanted).listed == [] and session.request(wanted).epoch == 1
    moved = {("t", 0): (11, 0, 1, 100), ("t", 2): (0, 0, 1, 100)}
    step = session.request(moved)
    assert (step.session_id, step.epoch, step.listed, step.forgotten) == (7, 1, [("t", 0), ("t", 2)], [("t", 1)])
    session.answered(step, moved, session_id=7)
    assert session.request(moved).listed == [] and session.request(moved).epoch == 2
    session.answered(session.request(moved), moved, session_id=8)  # not ours any more: start over
    assert session.request(moved).session_id == 0 and session.request(moved).listed == list(moved)


def test_a_follower_told_what_changed_compares_only_those_listings() -> None:
    session = FollowerSession()
    wanted = {("t", i): (0, 0, 1, 100) for i in range(4)}
    session.answered(session.request(wanted), wanted, session_id=7)
    moved = dict(wanted) | {("t", 1): (5, 0, 1, 100), ("t", 9): (0, 0, 1, 100)}
    del moved[("t", 3)]
    step = session.request(moved, {("t", 1), ("t", 3), ("t", 9), ("t", 2)})  # t-2 named, unmoved: not listed
    assert (sorted(step.listed), step.forgotten) == ([("t", 1), ("t", 9)], [("t", 3)])
    assert session.request(moved, set()).listed == []  # nothing named: nothing compared
    assert sorted(session.request(moved).listed) == [("t", 1), ("t", 9)]  # without: every listing compared


# --- on the wire: this test is follower 2 of a leader in-process ----------------------------------------------


def _follower_fetch(session_id: int, epoch: int, listed: dict[int, int], forgotten: list[int] = (), replica=2):
    return {
        "replica_id": replica,
        "max_wait_ms": 0,
        "min_bytes": 1,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "session_id": session_id,
        "session_epoch": epoch,
        "topics": [
            {
                "topic": TOPIC,
                "partitions": [
                    {
                        "partition": index,
                        "current_leader_epoch": 0,
                        "fetch_offset": offset,
                        "last_fetched_epoch": -1,
                        "log_start_offset": 0,
                        "partition_max_bytes": 1 << 20,
                    }
                    for index, offset in listed.items()
                ],
            }
        ]
        if listed
        else [],
        "forgotten_topics_data": [{"topic": TOPIC, "partitions": list(forgotten)}] if forgotten else [],
        "rack_id": "",
    }


def _answered(response) -> dict[int, tuple[int, int, int]]:
    """partition -> (error, high watermark, record bytes)."""
    return {
        p.partition_index: (p.error_code, p.high_watermark, len(p.records or b""))
        for topic in response.responses
        for p in topic.partitions
    }


async def test_a_followers_session_answers_only_partitions_with_news(make_cluster) -> None:
    cluster = await make_cluster([1])
    await cluster.create_topic(TOPIC, PARTITIONS)
    for index in range(PARTITIONS):
        cluster.apply(TOPIC, index, led_by(1, (1, 2, 3), isr=(1,)))
    leader = await connect(cluster, 1)
    follower = await connect(cluster, 1)

    opened = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(0, 0, dict.fromkeys(range(4), 0)))
    assert opened.error_code == ErrorCode.NONE and opened.session_id != 0
    assert _answered(opened) == {i: (ErrorCode.NONE, 0, 0) for i in range(PARTITIONS)}  # opening: in full
    sid = opened.session_id

    # Nothing new: an incremental fetch listing nothing is answered with nothing.
    idle = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(sid, 1, {}))
    assert (idle.error_code, idle.session_id, _answered(idle)) == (ErrorCode.NONE, sid, {})

    # Records in partition 2 only: only it is answered, from the offset the session holds.
    body = produce_body(TOPIC, 2, batch([b"a", b"b"]), acks=1)
    assert (await leader.request(ApiKey.PRODUCE, 9, body)).responses[0].partition_responses[0].error_code == 0
    news = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(sid, 2, {}))
    answered = _answered(news)
    assert list(answered) == [2] and answered[2][2] > 0

    # The follower took them: it lists its new position, which moves the high watermark (ISR (1,): to the end).
    moved = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(sid, 3, {2: 2}))
    assert _answered(moved) in ({}, {2: (ErrorCode.NONE, 2, 0)})

    # A forgotten partition leaves the session: its records are not answered any more.
    body = produce_body(TOPIC, 0, batch([b"c"]), acks=1)
    await leader.request(ApiKey.PRODUCE, 9, body)
    forgot = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(sid, 4, {}, forgotten=[0]))
    assert 0 not in _answered(forgot)
    relisted = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(sid, 5, {0: 0}))
    assert _answered(relisted)[0][2] > 0

    # Session errors change nothing: the next right epoch still works.
    wrong = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(sid, 9, {}))
    assert (wrong.error_code, wrong.session_id, wrong.responses) == (ErrorCode.INVALID_FETCH_SESSION_EPOCH, 0, [])
    unknown = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(sid + 1000, 1, {}))
    assert unknown.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND
    other = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(sid, 6, {}, replica=3))
    assert other.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND  # another follower cannot use it
    fine = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(sid, 6, {}))
    assert (fine.error_code, fine.session_id) == (ErrorCode.NONE, sid)

    # Epoch -1 closes it: a full answer without a session, and the id is gone.
    closed = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(sid, -1, {1: 0}))
    assert (closed.error_code, closed.session_id, list(_answered(closed))) == (ErrorCode.NONE, 0, [1])
    gone = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(sid, 7, {}))
    assert gone.error_code == ErrorCode.FETCH_SESSION_ID_NOT_FOUND


async def test_only_followers_of_a_partition_led_here_get_sessions(make_cluster) -> None:
    cluster = await make_cluster([1])
    await cluster.create_topic(TOPIC, PARTITIONS)
    cluster.apply(TOPIC, 0, led_by(1, (1, 2), isr=(1,)))
    client = await connect(cluster, 1)
    consumer = _follower_fetch(0, 0, {0: 0}, replica=-1)
    assert (await client.request(ApiKey.FETCH, FETCH_VERSION, consumer)).session_id == 0
    stranger = _follower_fetch(0, 0, {0: 0}, replica=7)
    answer = await client.request(ApiKey.FETCH, FETCH_VERSION, stranger)
    assert answer.session_id == 0 and _answered(answer)[0][0] == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert len(cluster.node(1).fetch_sessions) == 0
    answer = await client.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(0, 0, {0: 0}))
    assert answer.session_id != 0 and len(cluster.node(1).fetch_sessions) == 1


def _open_sessions(sessions: FetchSessions) -> list:
    return [s for s in map(sessions.get, range(1, 1000)) if s is not None]


async def test_followers_replicate_in_sessions_and_start_over_when_the_leader_drops_them(make_cluster) -> None:
    """A session the leader closed, or whose epoch no longer matches (INVALID_FETCH_SESSION_EPOCH), is started
    over by the follower's next fetch on the same connection: with a reconnect backoff of a minute, a follower that
    reconnected instead would hold acks=all past the test's limit."""
    cluster = await make_cluster([1, 2, 3], replica_fetch_backoff_ms="60000")
    await cluster.create_topic(TOPIC, configs={"min.insync.replicas": "3"})
    cluster.apply(TOPIC, 0, led_by(1))
    client = await connect(cluster, 1)
    assert (await produce(client, batch([b"a"]))).error_code == ErrorCode.NONE
    sessions = cluster.node(1).fetch_sessions
    await until(lambda: len(sessions) == 2)
    rounds = 1
    for drop in ("close", "epoch", "close", "epoch"):
        for session in _open_sessions(sessions):
            if drop == "close":
                sessions.close(session.session_id)  # as a leader whose slots went to others
            else:
                session.epoch += 5  # as a leader that lost track of the follower's fetches
        with trio.fail_after(10):
            for _ in range(2):
                assert (await produce(client, batch([b"b%d" % rounds]))).error_code == ErrorCode.NONE
                rounds += 1
        await until(lambda: len(sessions) == 2)
    assert all(end_offset(cluster, n) == rounds for n in (1, 2, 3))
    assert log_bytes(cluster, 2) == log_bytes(cluster, 1) == log_bytes(cluster, 3)


# --- idle partitions: not read again until something the follower must learn moves ------------------------------


def _told(response) -> dict[int, tuple[int, int, int, int]]:
    """partition -> (error, high watermark, log start offset, record bytes)."""
    return {
        p.partition_index: (p.error_code, p.high_watermark, p.log_start_offset, len(p.records or b""))
        for topic in response.responses
        for p in topic.partitions
    }


def _count_reads(cluster, monkeypatch) -> collections.Counter:
    """Partitions the leader (node 1) reads for followers, counted from now on."""
    replicas = cluster.node(1).replicas
    real = replicas.read_for_follower
    reads: collections.Counter = collections.Counter()

    def counted(topic, partition, *args, **kwargs):
        reads[partition] += 1
        return real(topic, partition, *args, **kwargs)

    monkeypatch.setattr(replicas, "read_for_follower", counted)
    return reads


async def _followed_by_2(make_cluster, partitions: int, **properties: str):
    """Node 1 alone, leading ``partitions`` partitions of the topic with follower 2 in their ISR."""
    cluster = await make_cluster([1], **properties)
    await cluster.create_topic(TOPIC, partitions)
    for index in range(partitions):
        cluster.apply(TOPIC, index, led_by(1, (1, 2), isr=(1, 2)))
    return cluster


async def _idle_session(cluster, partitions: int):
    """Follower 2's session on node 1 over ``partitions`` partitions at offset 0, each asleep after one round;
    returns (fetch, session): ``await fetch(listed=None, **body)`` answers ``_told``."""
    follower = await connect(cluster, 1)
    everything = dict.fromkeys(range(partitions), 0)
    opened = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(0, 0, everything))
    sid, epoch = opened.session_id, 1
    session = cluster.node(1).fetch_sessions.get(sid)

    async def fetch(listed=None, **body) -> dict:
        nonlocal epoch
        request = _follower_fetch(sid, epoch, listed or {}) | body
        epoch += 1
        answer = await follower.request(ApiKey.FETCH, FETCH_VERSION, request)
        assert answer.error_code == ErrorCode.NONE
        return _told(answer)

    assert await fetch() == {}
    assert set(session.asleep) == {(TOPIC, index) for index in range(partitions)} and session.awake == {}
    return fetch, session


async def _produce_to(cluster, partition: int, value: bytes, **batch_args) -> None:
    leader = await connect(cluster, 1)
    body = produce_body(TOPIC, partition, batch([value], **batch_args), acks=1)
    assert (await leader.request(ApiKey.PRODUCE, 9, body)).responses[0].partition_responses[0].error_code == 0


async def test_an_idle_partition_is_not_read_again_until_something_it_would_tell_moves(
    make_cluster, monkeypatch
) -> None:
    cluster = await _followed_by_2(make_cluster, PARTITIONS)
    replicas = cluster.node(1).replicas
    leader = await connect(cluster, 1)
    fetch, _session = await _idle_session(cluster, PARTITIONS)
    reads = _count_reads(cluster, monkeypatch)

    # Idle: nothing read, nothing answered.
    await trio.sleep(0.05)
    before = now_ms()
    for _ in range(3):
        assert await fetch() == {}
    assert reads == {}
    progress = replicas.roles.get((TOPIC, 1)).leading.followers[2]

    # An append: the partition wakes, the follower noted caught up there as of its last fetch (as the reads
    # skipped would have noted it); only that partition is read and answered; the follower's new position moves the
    # high watermark, which it is told; then it is idle again.
    body = produce_body(TOPIC, 1, batch([b"a", b"b"]), acks=1)
    assert (await leader.request(ApiKey.PRODUCE, 9, body)).responses[0].partition_responses[0].error_code == 0
    assert progress.last_caught_up_ms >= before and progress.last_fetch_ms >= before
    told = await fetch()
    assert list(told) == [1] and told[1][3] > 0 and set(reads) == {1}
    assert await fetch({1: 2}) == {1: (ErrorCode.NONE, 2, 0, 0)}
    reads.clear()
    assert await fetch() == {} and reads == {}

    # Records deleted below the high watermark: the new log start offset is told.
    assert replicas.delete_records({(TOPIC, 1): 1})[(TOPIC, 1)].error == ErrorCode.NONE
    assert await fetch() == {1: (ErrorCode.NONE, 2, 1, 0)}
    assert await fetch() == {}

    # A new leader epoch (same leader): the follower, fetching with the old one, is told it is fenced.
    cluster.apply(TOPIC, 2, led_by(1, (1, 2), isr=(1, 2), leader_epoch=1))
    assert await fetch() == {2: (ErrorCode.FENCED_LEADER_EPOCH, -1, -1, 0)}
    # The follower left the ISR: its partition is read again (its fetch is what lets it rejoin), with nothing new
    # (partition 2's error is answered again, before any read).
    reads.clear()
    cluster.apply(TOPIC, 3, led_by(1, (1, 2), isr=(1,), partition_epoch=1))
    told = await fetch()
    assert 3 not in told and set(reads) == {3}


async def test_an_idle_followers_high_watermark_moved_by_the_other_follower_is_told(make_cluster) -> None:
    """Follower 2 is at the log end, so its partition is idle to its session; follower 3's fetch then moves the high
    watermark without an append, and follower 2's next fetch is told the new one."""
    cluster = await make_cluster([1])
    await cluster.create_topic(TOPIC, 1)
    cluster.apply(TOPIC, 0, led_by(1, (1, 2, 3), isr=(1, 2, 3)))
    leader = await connect(cluster, 1)
    sessions = {}
    epochs = {}
    for replica in (2, 3):
        client = await connect(cluster, 1)
        opened = await client.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(0, 0, {0: 0}, replica=replica))
        sessions[replica], epochs[replica] = (client, opened.session_id), 1

    async def fetch(replica: int, listed=None) -> dict:
        client, sid = sessions[replica]
        body = _follower_fetch(sid, epochs[replica], listed or {}, replica=replica)
        answer = await client.request(ApiKey.FETCH, FETCH_VERSION, body)
        assert answer.error_code == ErrorCode.NONE
        epochs[replica] += 1
        return _told(answer)

    assert (await produce(leader, batch([b"a"]), acks=1)).error_code == ErrorCode.NONE
    assert (await fetch(2))[0][3] > 0
    assert await fetch(2, {0: 1}) == {}  # at the log end; the high watermark waits for follower 3
    assert await fetch(2) == {}
    assert (await fetch(3))[0][3] > 0
    assert await fetch(3, {0: 1}) == {0: (ErrorCode.NONE, 1, 0, 0)}
    assert await fetch(2) == {0: (ErrorCode.NONE, 1, 0, 0)}
    assert await fetch(2) == {}


async def test_a_fetch_parked_while_its_session_is_replaced_is_answered_in_full(make_cluster) -> None:
    """The follower opened a new session while its incremental fetch was parked: that fetch is answered in full,
    the partitions its old session found idle included."""
    cluster = await _followed_by_2(make_cluster, PARTITIONS)
    leader = await connect(cluster, 1)
    follower = await connect(cluster, 1)
    opened = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(0, 0, dict.fromkeys(range(4), 0)))
    sid = opened.session_id
    assert _told(await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(sid, 1, {}))) == {}
    parked_body = _follower_fetch(sid, 2, {}) | {"max_wait_ms": 10_000}
    answers = []

    async def parked() -> None:
        answers.append(await follower.request(ApiKey.FETCH, FETCH_VERSION, parked_body))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(parked)
        session = cluster.node(1).fetch_sessions.get(sid)
        await until(lambda: session.epoch == 3)  # applied, and parked in the same step
        other = await connect(cluster, 1)
        reopened = await other.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(0, 0, dict.fromkeys(range(4), 0)))
        assert reopened.session_id not in (0, sid)
        body = produce_body(TOPIC, 1, batch([b"a"]), acks=1)
        assert (await leader.request(ApiKey.PRODUCE, 9, body)).responses[0].partition_responses[0].error_code == 0
    (answer,) = answers
    assert answer.session_id == 0
    told = _told(answer)
    assert sorted(told) == [0, 1, 2, 3] and told[1][3] > 0


# --- partitions asleep: rounds cost what changed, and the skipped reads still count -------------------------------


async def test_a_follower_fetching_while_its_partitions_sleep_stays_in_sync_past_the_lag_limit(make_cluster) -> None:
    """Rounds read nothing asleep, yet each counts: after idling for longer than replica.lag.time.max.ms, an append
    finds the follower caught up as of its last fetch (in sync); a follower that stopped fetching as long before the
    append is not."""
    cluster = await _followed_by_2(make_cluster, 2, replica_lag_time_max_ms="300")
    replicas = cluster.node(1).replicas
    fetch, _session = await _idle_session(cluster, 2)
    until_s = trio.current_time() + 0.6
    while trio.current_time() < until_s:
        assert await fetch() == {}
        await trio.sleep(0.03)

    await _produce_to(cluster, 0, b"a")
    leading = replicas.roles.get((TOPIC, 0)).leading
    assert 2 in leading.isr and leading.out_of_sync(1, now_ms()) == set()

    await trio.sleep(0.6)  # the follower fetches no more
    await _produce_to(cluster, 1, b"b")
    leading = replicas.roles.get((TOPIC, 1)).leading
    assert leading.out_of_sync(1, now_ms()) == {2} or 2 not in leading.isr  # (the ISR maintenance may be first)


async def test_a_parked_fetch_whose_partitions_all_sleep_is_woken_by_an_append(make_cluster) -> None:
    cluster = await _followed_by_2(make_cluster, PARTITIONS)
    fetch, session = await _idle_session(cluster, PARTITIONS)
    answers = []

    async def parked() -> None:
        answers.append(await fetch(max_wait_ms=10_000))

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(parked)
            await until(lambda: session.parked is not None)
            await _produce_to(cluster, 3, b"a")
    (told,) = answers
    assert list(told) == [3] and told[3][3] > 0


async def test_partitions_wake_when_their_follower_registers_anew_or_its_session_ends(
    make_cluster, monkeypatch
) -> None:
    cluster = await _followed_by_2(make_cluster, PARTITIONS)
    replicas = cluster.node(1).replicas
    fetch, session = await _idle_session(cluster, PARTITIONS)
    reads = _count_reads(cluster, monkeypatch)
    assert await fetch() == {} and reads == {}

    # Follower 2 restarted (a new registration): its fetches count for the new incarnation, so each is read.
    monkeypatch.setattr(replicas, "incarnation_of", lambda broker: 7)
    assert await fetch() == {} and set(reads) == set(range(PARTITIONS))
    progress = replicas.roles.get((TOPIC, 0)).leading.followers[2]
    assert progress.incarnation == 7
    reads.clear()
    assert await fetch() == {} and reads == {}  # asleep again, under the new incarnation

    # This leader took follower 2 out of partition 1's ISR (its ISR maintenance): read again, as its fetches are
    # what lets it rejoin.
    state = replicas.roles.get((TOPIC, 1)).state
    replicas.adopt_isr(TOPIC, 1, dataclasses.replace(state, isr=(1,), partition_epoch=state.partition_epoch + 1))
    assert await fetch() == {} and set(reads) == {1}
    reads.clear()
    assert await fetch() == {} and set(reads) == {1}  # out of the ISR: read at each fetch

    # A new session replaces this one: what it held asleep is let go.
    follower = await connect(cluster, 1)
    reopened = await follower.request(ApiKey.FETCH, FETCH_VERSION, _follower_fetch(0, 0, {0: 0}))
    assert reopened.session_id != session.session_id
    assert session.asleep == {}


async def test_retention_raising_the_log_start_wakes_the_partition(make_cluster) -> None:
    cluster = await make_cluster([1])
    await cluster.create_topic(TOPIC, 1, {"segment.bytes": "200", "retention.ms": "60000"})
    cluster.apply(TOPIC, 0, led_by(1, (1, 2), isr=(1, 2)))
    hour_ago = now_ms() - 3_600_000
    for i in range(5):
        await _produce_to(cluster, 0, b"old-%d" % i * 10, now_ms=hour_ago)
    fetch, _session = await _idle_session(cluster, 0)
    assert (await fetch({0: 5}))[0][1] == 5  # the follower at the end: the high watermark moves there
    assert await fetch() == {}
    cluster.node(1)._sweep_retention()
    assert cluster.node(1).logs.get(TOPIC, 0).log_start_offset == 4
    assert await fetch() == {0: (ErrorCode.NONE, 5, 4, 0)}


async def test_a_followers_round_computes_only_the_listings_that_moved(make_cluster, monkeypatch) -> None:
    """Followers of 40 partitions, one of them written: each round looks up the logs of what its answer moved, not
    of every partition followed."""
    cluster = await make_cluster([1, 2, 3])
    await cluster.create_topic(TOPIC, 40, {"min.insync.replicas": "3"})
    for index in range(40):
        cluster.apply(TOPIC, index, led_by(1))
    client = await connect(cluster, 1)
    assert (await produce(client, batch([b"a"]))).error_code == ErrorCode.NONE
    looked_up: collections.Counter = collections.Counter()
    for node_id in (2, 3):
        replicas = cluster.node(node_id).replicas
        real = replicas.get_log

        def counted(topic, partition, real=real):
            looked_up[partition] += 1
            return real(topic, partition)

        monkeypatch.setattr(replicas, "get_log", counted)
    produces = 20
    for i in range(produces):
        assert (await produce(client, batch([b"b%d" % i]))).error_code == ErrorCode.NONE
    assert set(looked_up) == {0}
    assert looked_up[0] <= 8 * produces  # (each produce: a round or two of each follower, a few lookups each)


async def test_a_follower_whose_retention_raised_its_log_start_tells_its_leader(make_cluster) -> None:
    cluster = await make_cluster([1, 2])
    await cluster.create_topic(TOPIC, 1, {"segment.bytes": "200", "retention.ms": "60000"})
    cluster.apply(TOPIC, 0, led_by(1, (1, 2)))
    client = await connect(cluster, 1)
    hour_ago = now_ms() - 3_600_000
    for i in range(5):
        assert (await produce(client, batch([b"old-%d" % i * 10], now_ms=hour_ago))).error_code == ErrorCode.NONE
    (session,) = _open_sessions(cluster.node(1).fetch_sessions)
    await until(lambda: session.partitions[TOPIC][0]["fetch_offset"] == 5)
    follower_log = cluster.node(2).logs.get(TOPIC, 0)
    await until(lambda: follower_log.high_watermark == 5)
    cluster.node(2)._sweep_retention()  # the follower's own retention, before the leader's
    assert follower_log.log_start_offset == 4
    await until(lambda: session.partitions[TOPIC][0]["log_start_offset"] == 4)
