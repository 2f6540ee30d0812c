"""Where a returning follower cuts its log: KIP-101's and KIP-279's scenarios."""

from __future__ import annotations

from pathlib import Path

from oncelog.broker.replication.truncation import Truncation, truncation_point
from oncelog.storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEndOffset,
    LeaderEpochCache,
)


def cache(tmp_path: Path, name: str, entries: list[tuple[int, int]]) -> LeaderEpochCache:
    built = LeaderEpochCache(tmp_path / f"{name}-{LEADER_EPOCH_CHECKPOINT}")
    for epoch, start in entries:
        built.assign(epoch, start)
    return built


def test_old_leader_returns_with_a_tail_the_new_leader_never_had(tmp_path: Path) -> None:
    """A led epoch 0 to offset 12; B had replicated to 10, became leader (epoch 1 from 10). A must cut to 10."""
    leader = cache(tmp_path, "b", [(0, 0), (1, 10)])
    follower = cache(tmp_path, "a", [(0, 0)])
    answer = leader.end_offset_for(follower.latest_epoch, log_end_offset=15)
    assert answer == EpochEndOffset(0, 10)
    assert truncation_point(follower, log_end_offset=12, high_watermark=8, leader_answer=answer) == Truncation(
        10, complete=True
    )


def test_diverged_after_fast_repeated_failovers(tmp_path: Path) -> None:
    """KIP-279: the leader never had the follower's latest epoch; the answer names an older one, and the cut is
    where the two logs' copies of that epoch both end."""
    follower = cache(tmp_path, "f", [(0, 0), (1, 5), (2, 8)])
    leader = cache(tmp_path, "l", [(0, 0), (3, 6)])
    answer = leader.end_offset_for(follower.latest_epoch, log_end_offset=12)
    assert answer == EpochEndOffset(0, 6)
    assert truncation_point(follower, log_end_offset=10, high_watermark=4, leader_answer=answer) == Truncation(
        5, complete=True
    )


def test_an_epoch_the_follower_lacks_means_asking_again(tmp_path: Path) -> None:
    follower = cache(tmp_path, "f", [(0, 0), (2, 5)])
    first = truncation_point(follower, log_end_offset=9, high_watermark=3, leader_answer=EpochEndOffset(1, 7))
    assert first == Truncation(5, complete=False)  # the follower's copy of epochs <= 1 ends at 5
    follower.truncate_from_end(first.offset)
    assert follower.latest_epoch == 0  # the next question is for epoch 0


def test_no_answer_falls_back_to_the_high_watermark(tmp_path: Path) -> None:
    follower = cache(tmp_path, "f", [(0, 0)])
    undefined = EpochEndOffset(UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert truncation_point(follower, log_end_offset=9, high_watermark=3, leader_answer=undefined) == Truncation(
        3, complete=True
    )


def test_nothing_to_cut_when_the_logs_agree(tmp_path: Path) -> None:
    leader = cache(tmp_path, "l", [(0, 0), (1, 10)])
    follower = cache(tmp_path, "f", [(0, 0), (1, 10)])
    answer = leader.end_offset_for(1, log_end_offset=20)
    assert truncation_point(follower, log_end_offset=14, high_watermark=12, leader_answer=answer) == Truncation(
        14, complete=True
    )
