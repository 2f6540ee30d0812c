"""The leader-epoch cache: Kafka's assignment rules, OffsetForLeaderEpoch answers, truncation, the checkpoint file."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from oncelog.storage.errors import StorageError
from oncelog.storage.leader_epoch import (
    LEADER_EPOCH_CHECKPOINT,
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    EpochEndOffset,
    LeaderEpochCache,
)


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / LEADER_EPOCH_CHECKPOINT


def test_assign_keeps_epochs_and_offsets_increasing(path: Path) -> None:
    cache = LeaderEpochCache(path)
    cache.assign(0, 0)
    cache.assign(0, 5)  # same epoch, later batch: nothing new
    cache.assign(2, 10)
    cache.assign(3, 20)
    assert cache.entries == [(0, 0), (2, 10), (3, 20)]
    cache.assign(3, 15)  # the latest epoch starting earlier (a follower rewrote its tail): replaces it
    assert cache.entries == [(0, 0), (2, 10), (3, 15)]
    cache.assign(4, 12)  # a new epoch starting before entries: they conflict and go
    assert cache.entries == [(0, 0), (2, 10), (4, 12)]
    with pytest.raises(ValueError):
        cache.assign(-1, 0)


def test_end_offset_for_answers_as_kafka(path: Path) -> None:
    cache = LeaderEpochCache(path)
    assert cache.end_offset_for(0, 100) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)  # nothing known
    for epoch, start in ((1, 0), (3, 40), (5, 70)):
        cache.assign(epoch, start)
    assert cache.end_offset_for(5, 100) == EpochEndOffset(5, 100)  # the latest epoch ends at the log end
    assert cache.end_offset_for(3, 100) == EpochEndOffset(3, 70)
    assert cache.end_offset_for(4, 100) == EpochEndOffset(3, 70)  # an epoch this log never had: the one before it
    assert cache.end_offset_for(0, 100) == EpochEndOffset(0, 0)  # older than all: ends where ours begin
    assert cache.end_offset_for(6, 100) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
    assert cache.end_offset_for(UNDEFINED_EPOCH, 100) == (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)


def test_truncation_from_end_and_start(path: Path) -> None:
    cache = LeaderEpochCache(path)
    for epoch, start in ((1, 0), (3, 40), (5, 70)):
        cache.assign(epoch, start)
    cache.truncate_from_end(70)  # a follower cut its divergent tail at 70: epoch 5 never happened here
    assert cache.entries == [(1, 0), (3, 40)]
    cache.truncate_from_end(200)
    assert cache.entries == [(1, 0), (3, 40)]
    cache.truncate_from_start(50)  # retention removed offsets below 50: epoch 3 is in force from there
    assert cache.entries == [(3, 50)]
    cache.truncate_from_start(10)
    assert cache.entries == [(3, 50)]


def test_checkpoint_survives_a_restart_in_kafkas_format(path: Path) -> None:
    cache = LeaderEpochCache(path)
    cache.assign(0, 0)
    cache.assign(7, 1234)
    assert path.read_text() == "0\n2\n0 0\n7 1234\n"
    cache.truncate_from_end(1000)
    assert LeaderEpochCache(path).entries == [(0, 0)]


@pytest.mark.parametrize("text", ["1\n0\n", "0\n2\n0 0\n", "0\n1\n0\n", "0\n1\nx 1\n"])
def test_a_malformed_checkpoint_is_a_storage_error(path: Path, text: str) -> None:
    path.write_text(text)
    with pytest.raises(StorageError):
        LeaderEpochCache(path)


@settings(deadline=None)  # every assign fsyncs a file: slow under load, not wrong
@given(st.lists(st.tuples(st.integers(0, 20), st.integers(0, 1000)), max_size=30))
def test_entries_are_always_strictly_increasing(tmp_path_factory: pytest.TempPathFactory, assigns: list) -> None:
    cache = LeaderEpochCache(tmp_path_factory.mktemp("epochs") / LEADER_EPOCH_CHECKPOINT)
    for epoch, start in assigns:
        cache.assign(epoch, start)
        entries = cache.entries
        assert all(a.epoch < b.epoch and a.start_offset < b.start_offset for a, b in pairwise(entries))
        assert entries[-1] == (epoch, start) or (entries[-1].epoch == epoch and entries[-1].start_offset <= start)
