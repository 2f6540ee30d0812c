"""Incremental fetch sessions (KIP-227) on the leader, for followers: Kafka's FetchSessionCache and FetchContext.

A follower's fetch that asks for a session (session id 0, epoch 0) is answered in full and opens one; after that the
follower lists only the partitions whose fetch position changed (and ``forgotten_topics_data`` for those it stopped
fetching), and the answer holds only the partitions with something new: records, an error, or a changed high
watermark, last stable offset or log start offset. What a session saves is listing, encoding and decoding the idle
partitions, which dominates a round on a broker following many partitions; and reading them. A partition whose
last answer found the follower at the log end with nothing more to tell it falls *asleep* in the session
(``ReplicaManager.sleep_idle``): rounds neither read it nor watch it, so a round costs what changed, not what the
session holds. Whatever it holds that moves (an append, its high watermark or log start, its role or ISR, the
follower listing it again or its registration changing) wakes it (``ReplicaManager.wake_idle``), and the follower's
progress there is then noted as the skipped reads would have noted it: caught up at the session's last read.

Guarantees, as Kafka's:
- epochs: a session's fetches carry 1, 2, ... (wrapping to 1 after 2**31-1); another epoch is answered
  INVALID_FETCH_SESSION_EPOCH, an unknown session id FETCH_SESSION_ID_NOT_FOUND, and neither changes the session;
- epoch 0 with a session id closes that session and opens a new one; epoch -1 closes it and fetches without one;
- a partition answered with an error is answered again at the next fetch even if nothing changed, so the follower
  sees it clear.

Bounded: sessions go only to followers of a partition led here (a consumer, or a client naming any replica id, gets
none and fetches in full, as a broker without free session slots answers), at most one per follower (its new session
replaces the old), and at most ``max.incremental.fetch.session.cache.slots`` in all (0 turns sessions off). Sessions
name topics by name, so they are given to fetches of versions 7-12; v13+ (topic ids) fetches are answered without one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.fetch_wait import FetchWaiter
    from oncelog.broker.replica_manager import FollowerIdleMark

#: Kafka's FetchRequest.INVALID_SESSION_ID, FINAL_EPOCH (no session) and INITIAL_EPOCH (open one).
NO_SESSION_ID = 0
SESSIONLESS_EPOCH = -1
INITIAL_EPOCH = 0
#: Kafka's ``max.incremental.fetch.session.cache.slots`` default.
MAX_SESSION_SLOTS = 1000
#: The first and last Fetch versions with sessions that name topics (v13+ name them by id).
MIN_SESSION_VERSION = 7
MAX_NAMED_SESSION_VERSION = 12

TopicPartition = tuple[str, int]
#: What the follower last saw of a partition: high watermark, last stable offset, log start offset (None: resend).
_Seen = tuple[int, int, int] | None


def next_epoch(epoch: int) -> int:
    """Kafka's FetchMetadata.nextEpoch: 1 after the initial epoch, wrapping from 2**31-1 back to 1."""
    return 1 if epoch in (INITIAL_EPOCH, 2**31 - 1) else epoch + 1


@dataclass(eq=False)
class FetchSession:
    """One follower's session: the partitions it fetches (each with its last listing), which of them are awake (read
    each round) or asleep, and what it was last told."""

    session_id: int
    replica: int
    #: The epoch the follower's next fetch must carry.
    epoch: int = 1
    #: Per topic, per partition: the listing (fetch position, limits) of the follower's last request naming it.
    partitions: dict[str, dict[int, object]] = field(default_factory=dict)
    #: What each partition's last answer told the follower.
    seen: dict[TopicPartition, _Seen] = field(default_factory=dict)
    #: ``partitions`` but those asleep: what a round reads and watches.
    awake: dict[str, dict[int, object]] = field(default_factory=dict)
    #: The partitions asleep, each with the mark of the read that found it idle.
    asleep: dict[TopicPartition, FollowerIdleMark] = field(default_factory=dict)
    #: When a fetch of the session last read (ms): the follower was caught up then on every partition asleep.
    last_read_ms: int = 0
    #: The follower's registration (incarnation) its partitions fell asleep under.
    incarnation: int | None = None
    #: The session's fetch while it is parked: a partition woken wakes it.
    parked: FetchWaiter | None = None

    def __post_init__(self) -> None:
        self.awake = {topic: dict(per_topic) for topic, per_topic in self.partitions.items()}

    def update(self, listed: dict[str, dict[int, object]], forgotten: Iterable[TopicPartition]) -> None:
        """Apply an incremental request: ``forgotten`` leave, ``listed`` join or take their new positions (wake
        those asleep first: ``ReplicaManager.wake_idle``)."""
        for topic, index in forgotten:
            for partitions in (self.partitions, self.awake):
                per_topic = partitions.get(topic)
                if per_topic is not None:
                    per_topic.pop(index, None)
                    if not per_topic:
                        del partitions[topic]
            self.seen.pop((topic, index), None)
        for topic, per_topic in listed.items():
            self.partitions.setdefault(topic, {}).update(per_topic)
            self.awake.setdefault(topic, {}).update(per_topic)

    def fall_asleep(self, tp: TopicPartition, mark: FollowerIdleMark) -> bool:
        """Stop reading ``tp`` until ``woken``; False (nothing done) if the session does not hold it awake."""
        topic, index = tp
        per_topic = self.awake.get(topic)
        if per_topic is None or index not in per_topic:
            return False
        del per_topic[index]
        if not per_topic:
            del self.awake[topic]
        self.asleep[tp] = mark
        return True

    def woken(self, tp: TopicPartition) -> FollowerIdleMark | None:
        """Read ``tp`` again from the next round (if the session still holds it); the mark it slept with, or None
        if it was not asleep. Wakes the session's parked fetch."""
        mark = self.asleep.pop(tp, None)
        if mark is None:
            return None
        topic, index = tp
        listing = self.partitions.get(topic, {}).get(index)
        if listing is not None:
            self.awake.setdefault(topic, {})[index] = listing
        if self.parked is not None:
            self.parked.set()
        return mark

    def changed(self, topic: str, index: int, error: int, records: int, seen: tuple[int, int, int]) -> bool:
        """Whether an incremental answer must carry this partition (Kafka's CachedPartition.maybeUpdateResponseData),
        noting what it is told if so."""
        tp = (topic, index)
        if error != ErrorCode.NONE:
            self.seen[tp] = None  # answered again next time, so the follower sees the error clear
            return True
        if records or self.seen.get(tp) != seen:
            self.seen[tp] = seen
            return True
        return False


class FetchSessions:
    """The leader's sessions, by id; see the module docstring."""

    def __init__(
        self,
        slots: int = MAX_SESSION_SLOTS,
        *,
        new_id: Callable[[], int] | None = None,
        on_close: Callable[[FetchSession], None] = lambda session: None,
    ) -> None:
        """``new_id`` makes session ids (tests); by default 1, 2, ... (never 0). ``on_close`` is told of each session
        closed or replaced (its partitions asleep are woken there: ``ReplicaManager.release_session``)."""
        self._slots = slots
        self._on_close = on_close
        counter = itertools.count(1)
        self._new_id = new_id or (lambda: next(counter))
        self._by_id: dict[int, FetchSession] = {}
        self._by_replica: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._by_id)

    def get(self, session_id: int) -> FetchSession | None:
        return self._by_id.get(session_id)

    def close(self, session_id: int) -> None:
        session = self._by_id.pop(session_id, None)
        if session is None:
            return
        if self._by_replica.get(session.replica) == session_id:
            del self._by_replica[session.replica]
        self._on_close(session)

    def open(self, replica: int, partitions: dict[str, dict[int, object]]) -> FetchSession | None:
        """A new session for ``replica`` holding ``partitions`` (its previous one closed), or None when sessions
        are off or every slot is taken by other followers."""
        previous = self._by_replica.get(replica)
        if previous is not None:
            self.close(previous)
        if len(self._by_id) >= self._slots:
            return None
        session_id = self._new_id()
        while session_id == NO_SESSION_ID or session_id in self._by_id:
            session_id = self._new_id()
        session = FetchSession(session_id, replica, partitions={t: dict(p) for t, p in partitions.items()})
        self._by_id[session_id] = session
        self._by_replica[replica] = session_id
        return session
