"""What a partition's leader knows of its followers: how far each has fetched, the high watermark they allow, who
has fallen out of sync and who may rejoin. Pure: the caller passes the leader's log end offset and the time.

Rules of Kafka's ``Partition`` and ``Replica`` (leader side):
- A follower's fetch at offset ``o`` says it holds everything below ``o`` (its log end offset). It is *caught up*
  at that fetch if ``o`` reached the leader's log end offset then; or, if ``o`` reached the leader's log end offset
  as it was at the follower's previous fetch, it was caught up at that previous fetch's time.
- A follower in the ISR falls out of sync when it has not been caught up for ``replica.lag.time.max.ms`` (30000).
- A follower outside the ISR may join once its log end offset reaches the high watermark and the first offset of
  the current leader epoch (so it holds nothing from an older leader that this one has not confirmed).
- Progress belongs to one *incarnation* of a follower (its registration in the cluster, Kafka's broker epoch,
  KIP-903): a fetch by another incarnation than the last one forgets what the earlier one had fetched (a broker that
  restarted may have lost its disk), and a follower may join only by a fetch of the incarnation registered now, made
  within ``replica.lag.time.max.ms`` (a dead broker's last position is not proposed again and again).
- The high watermark is the smallest log end offset in the ISR (the leader's included); it never goes back.
- ``acks=all`` needs ``min.insync.replicas`` in the ISR when the records are appended (else NOT_ENOUGH_REPLICAS)
  and is answered once the high watermark passes them (NOT_ENOUGH_REPLICAS_AFTER_APPEND if the ISR shrank below
  the minimum meanwhile).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass

#: Kafka's ``replica.lag.time.max.ms`` default.
REPLICA_LAG_TIME_MAX_MS = 30_000
#: A follower's log end offset before its first fetch reaches this leader.
UNKNOWN_OFFSET = -1
#: The incarnation of every broker outside a cluster (nothing registers there, so nothing restarts unseen).
SINGLE_INCARNATION = 0

#: A broker's current incarnation (its registration), None while it is not registered.
IncarnationOf = Callable[[int], int | None]


def single_incarnation(_broker: int) -> int | None:
    """``IncarnationOf`` outside a cluster."""
    return SINGLE_INCARNATION


@dataclass
class FollowerProgress:
    log_end_offset: int = UNKNOWN_OFFSET
    last_caught_up_ms: int = 0
    last_fetch_leader_end_offset: int = UNKNOWN_OFFSET
    last_fetch_ms: int = 0
    #: The incarnation whose fetches this progress records (None: no fetch by a registered incarnation yet).
    incarnation: int | None = None


class LeaderReplicaState:
    """One partition led by this broker: ``isr`` includes the leader itself."""

    def __init__(
        self,
        *,
        leader: int,
        replicas: Collection[int],
        isr: Collection[int],
        leader_epoch_start_offset: int,
        high_watermark: int,
        now_ms: int,
        lag_time_max_ms: int = REPLICA_LAG_TIME_MAX_MS,
    ) -> None:
        self.leader = leader
        self.isr = set(isr)
        self.high_watermark = high_watermark
        self._epoch_start = leader_epoch_start_offset
        self._lag_max_ms = lag_time_max_ms
        # A new leader gives every follower a full lag period before judging it (Kafka resets the same way).
        self.followers = {r: FollowerProgress(last_caught_up_ms=now_ms) for r in replicas if r != leader}

    def record_fetch(
        self,
        replica: int,
        fetch_offset: int,
        leader_end_offset: int,
        now_ms: int,
        incarnation: int | None = SINGLE_INCARNATION,
    ) -> None:
        """A follower fetched from ``fetch_offset`` while the leader's log ended at ``leader_end_offset``; the fetch
        came from ``incarnation`` of the follower (None: not registered). A new incarnation starts its progress
        afresh, keeping only the time it was last caught up (so an ISR member still has to catch up in time)."""
        progress = self.followers[replica]
        if progress.incarnation != incarnation:
            progress = self.followers[replica] = FollowerProgress(
                last_caught_up_ms=progress.last_caught_up_ms, incarnation=incarnation
            )
        if fetch_offset >= leader_end_offset:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, now_ms)
        elif fetch_offset >= progress.last_fetch_leader_end_offset >= 0:
            progress.last_caught_up_ms = max(progress.last_caught_up_ms, progress.last_fetch_ms)
        progress.log_end_offset = fetch_offset
        progress.last_fetch_leader_end_offset = leader_end_offset
        progress.last_fetch_ms = now_ms

    def still_caught_up(
        self, replica: int, fetch_offset: int, leader_end_offset: int, now_ms: int, incarnation_of: IncarnationOf
    ) -> bool:
        """``record_fetch`` for the commonest fetch of an idle partition, when it can move nothing else: an ISR
        follower of the registered incarnation fetching at the leader's end, where its last fetch already was.
        Its caught-up time is noted and True returned (its position, hence the high watermark and the ISR, stays as
        it was); otherwise nothing is done and False returned (call ``record_fetch``)."""
        progress = self.followers[replica]
        if (
            fetch_offset != leader_end_offset
            or progress.log_end_offset != fetch_offset
            or replica not in self.isr
            or progress.incarnation != incarnation_of(replica)
        ):
            return False
        progress.last_caught_up_ms = max(progress.last_caught_up_ms, now_ms)
        progress.last_fetch_leader_end_offset = leader_end_offset
        progress.last_fetch_ms = now_ms
        return True

    def caught_up_while_idle(self, replica: int, leader_end_offset: int, last_read_ms: int) -> None:
        """The reads ``still_caught_up`` would have noted, skipped while the partition sat idle in the follower's
        fetch session (``broker.fetch_sessions``), the last at ``last_read_ms``: each found the follower, in the ISR,
        at the leader's end ``leader_end_offset``. Noted as it notes them, if the follower's position is still
        that one (a new incarnation's fetch since has started its progress afresh)."""
        progress = self.followers.get(replica)
        if progress is None or progress.log_end_offset != leader_end_offset:
            return
        progress.last_caught_up_ms = max(progress.last_caught_up_ms, last_read_ms)
        progress.last_fetch_leader_end_offset = leader_end_offset
        progress.last_fetch_ms = max(progress.last_fetch_ms, last_read_ms)

    def advance_high_watermark(self, leader_end_offset: int) -> bool:
        """Move the high watermark to the smallest log end offset in the ISR; True when it moved."""
        ends = [leader_end_offset] + [
            self.followers[r].log_end_offset for r in self.isr if r != self.leader and r in self.followers
        ]
        candidate = min(ends)
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def out_of_sync(self, leader_end_offset: int, now_ms: int) -> set[int]:
        """ISR followers to drop: neither at the leader's end nor caught up within the lag limit."""
        return {
            r
            for r in self.isr
            if r != self.leader
            and self.followers[r].log_end_offset != leader_end_offset
            and now_ms - self.followers[r].last_caught_up_ms > self._lag_max_ms
        }

    def ready_to_join(self, now_ms: int, incarnation_of: IncarnationOf = single_incarnation) -> dict[int, int]:
        """Followers outside the ISR that hold everything up to the high watermark and this epoch's start, by a
        fetch within the lag limit of the incarnation ``incarnation_of`` says is registered now; each with that
        incarnation (the controller refuses the change if it is no longer the registered one)."""
        return {
            r: progress.incarnation
            for r, progress in self.followers.items()
            if r not in self.isr
            and progress.incarnation is not None
            and progress.incarnation == incarnation_of(r)
            and now_ms - progress.last_fetch_ms <= self._lag_max_ms
            and progress.log_end_offset >= self.high_watermark
            and progress.log_end_offset >= self._epoch_start
        }

    def isr_changed(self, isr: Collection[int]) -> None:
        """The controller stored a new ISR (ours, or after a broker left)."""
        self.isr = set(isr)
