"""A follower's incremental fetch session with one leader (KIP-227; Kafka's FetchSessionHandler).

The first fetch lists every partition and asks for a session (id 0, epoch 0). Once the leader gives one, each fetch
lists only the partitions whose listing (fetch offset, log start offset, leader epoch, byte limit) differs from what
the leader last heard, and forgets those no longer fetched; the leader keeps the rest and answers only the
partitions with something new (``broker.fetch_sessions``).

Guarantees: what the leader holds is updated only by an answered fetch (``answered``), so a fetch that failed is
listed again in full by the next one after ``reset``; a leader that gives no session is asked in full every time,
so a leader without sessions (an older broker) is fetched from as before.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from oncelog.broker.fetch_sessions import INITIAL_EPOCH, NO_SESSION_ID, next_epoch

TopicPartition = tuple[str, int]
#: A partition's listing: fetch offset, log start offset, current leader epoch, max bytes.
Listing = tuple[int, int, int, int]


@dataclass(frozen=True)
class SessionRequest:
    """What one fetch sends: its session id and epoch, the partitions it lists and those it forgets."""

    session_id: int
    epoch: int
    listed: list[TopicPartition]
    forgotten: list[TopicPartition]


@dataclass
class FollowerSession:
    """The session with one leader; see the module docstring."""

    session_id: int = NO_SESSION_ID
    epoch: int = INITIAL_EPOCH
    #: Each partition's listing as the leader holds it.
    _held: dict[TopicPartition, Listing] = field(default_factory=dict)

    def request(
        self, wanted: Mapping[TopicPartition, Listing], changed: Collection[TopicPartition] | None = None
    ) -> SessionRequest:
        """The next fetch for the partitions ``wanted`` now (in full while no session is open). ``changed``, when
        given, holds every partition whose listing may differ from the last ``wanted`` (its listing moved, or it
        joined or left): only those are compared, so the request costs what changed."""
        if self.session_id == NO_SESSION_ID:
            return SessionRequest(NO_SESSION_ID, INITIAL_EPOCH, list(wanted), [])
        held = self._held
        if changed is None:
            listed = [tp for tp, listing in wanted.items() if held.get(tp) != listing]
            forgotten = [tp for tp in held if tp not in wanted]
        else:
            listed = [tp for tp in changed if tp in wanted and held.get(tp) != wanted[tp]]
            forgotten = [tp for tp in changed if tp not in wanted and tp in held]
        return SessionRequest(self.session_id, self.epoch, listed, forgotten)

    def answered(self, sent: SessionRequest, wanted: Mapping[TopicPartition, Listing], session_id: int) -> None:
        """The leader answered ``sent`` (built from ``wanted``) without error, naming ``session_id``."""
        if sent.session_id == NO_SESSION_ID:
            if session_id != NO_SESSION_ID:  # a session opened: it holds every listing sent
                self.session_id, self.epoch = session_id, next_epoch(INITIAL_EPOCH)
                self._held = {tp: wanted[tp] for tp in sent.listed}
            return
        if session_id != self.session_id:  # the leader dropped it: start over
            self.reset()
            return
        self.epoch = next_epoch(self.epoch)
        for tp in sent.forgotten:
            del self._held[tp]
        for tp in sent.listed:
            self._held[tp] = wanted[tp]

    def reset(self) -> None:
        """Forget the session: the next fetch lists every partition and asks for a new one."""
        self.session_id, self.epoch = NO_SESSION_ID, INITIAL_EPOCH
        self._held = {}
