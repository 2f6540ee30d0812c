"""Where a follower cuts its log when it starts following a new leader (KIP-101, with KIP-279's repeated steps).

The follower asks the leader (OffsetForLeaderEpoch) where the follower's latest epoch ended in the leader's log.
- The leader knows no such offset (UNDEFINED_EPOCH_OFFSET): fall back to the follower's high watermark.
- The leader answers for the same epoch: cut at the smaller of that end and the follower's own end of that epoch.
- The leader answers an older epoch (it never saw the follower's latest one): cut where the follower's copy of that
  older epoch ends, and ask again for it; repeating converges on the first offset where the logs diverge.
"""

from __future__ import annotations

from dataclasses import dataclass

from oncelog.storage.leader_epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET, EpochEndOffset, LeaderEpochCache


@dataclass(frozen=True)
class Truncation:
    """Cut the log at ``offset``; when ``complete`` is false, ask the leader again with the new latest epoch."""

    offset: int
    complete: bool


def truncation_point(
    cache: LeaderEpochCache, *, log_end_offset: int, high_watermark: int, leader_answer: EpochEndOffset
) -> Truncation:
    """The follower's next cut given the leader's answer for the follower's latest epoch."""
    if leader_answer.end_offset == UNDEFINED_EPOCH_OFFSET:
        return Truncation(min(high_watermark, log_end_offset), complete=True)
    if leader_answer.epoch == UNDEFINED_EPOCH:
        return Truncation(min(leader_answer.end_offset, log_end_offset), complete=True)
    ours = cache.end_offset_for(leader_answer.epoch, log_end_offset)
    if ours.epoch == UNDEFINED_EPOCH:
        return Truncation(min(leader_answer.end_offset, log_end_offset), complete=True)
    if ours.epoch != leader_answer.epoch:
        return Truncation(min(ours.end_offset, log_end_offset), complete=False)
    return Truncation(min(leader_answer.end_offset, ours.end_offset, log_end_offset), complete=True)
