"""Replica assignment as Kafka's AdminUtils makes it."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oncelog.broker.controller.placement import assign_replicas
from oncelog.broker.controller.refused import Refused
from oncelog.protocol.errors import ErrorCode


def test_rack_unaware_matches_kafkas_fixed_start_example() -> None:
    """Five brokers, ten partitions, replication factor 3, start and shift 0: Kafka's own expected assignment."""
    brokers = dict.fromkeys(range(5))
    assert assign_replicas(brokers, 10, 3, start=0, shift=0) == {
        0: [0, 1, 2],
        1: [1, 2, 3],
        2: [2, 3, 4],
        3: [3, 4, 0],
        4: [4, 0, 1],
        5: [0, 2, 3],
        6: [1, 3, 4],
        7: [2, 4, 0],
        8: [3, 0, 1],
        9: [4, 1, 2],
    }


def test_new_partitions_continue_the_walk() -> None:
    """CreatePartitions places partition 3.. where a topic created with more partitions would have had them."""
    brokers = dict.fromkeys([1, 2, 3])
    whole = assign_replicas(brokers, 6, 2, start=1, shift=2)
    added = assign_replicas(brokers, 3, 2, first_partition=3, start=1, shift=2)
    assert added == {p: whole[p] for p in (3, 4, 5)}


@pytest.mark.parametrize(("factor", "brokers"), [(0, 3), (4, 3), (2, 1)])
def test_impossible_factors_are_invalid_replication_factor(factor: int, brokers: int) -> None:
    with pytest.raises(Refused) as refused:
        assign_replicas(dict.fromkeys(range(brokers)), 1, factor)
    assert refused.value.error is ErrorCode.INVALID_REPLICATION_FACTOR


@given(
    brokers=st.integers(min_value=1, max_value=9),
    partitions=st.integers(min_value=1, max_value=40),
    data=st.data(),
)
def test_rack_unaware_properties(brokers: int, partitions: int, data: st.DataObject) -> None:
    factor = data.draw(st.integers(min_value=1, max_value=brokers))
    assignment = assign_replicas(dict.fromkeys(range(brokers)), partitions, factor)
    assert sorted(assignment) == list(range(partitions))
    for replicas in assignment.values():
        assert len(replicas) == factor == len(set(replicas))
    leaders = Counter(replicas[0] for replicas in assignment.values())
    assert max(leaders.values()) - min(leaders.get(b, 0) for b in range(brokers)) <= 1  # leaders spread evenly


@given(
    racks=st.integers(min_value=2, max_value=4),
    per_rack=st.integers(min_value=1, max_value=3),
    partitions=st.integers(min_value=1, max_value=30),
    data=st.data(),
)
def test_rack_aware_spreads_each_partition_over_racks(
    racks: int, per_rack: int, partitions: int, data: st.DataObject
) -> None:
    brokers = {rack * 10 + i: f"rack-{rack}" for rack in range(racks) for i in range(per_rack)}
    factor = data.draw(st.integers(min_value=1, max_value=len(brokers)))
    assignment = assign_replicas(brokers, partitions, factor)
    for replicas in assignment.values():
        assert len(set(replicas)) == factor
        assert len({brokers[r] for r in replicas}) == min(factor, racks)


def test_brokers_without_a_rack_fall_back_to_rack_unaware() -> None:
    brokers = {1: "a", 2: None, 3: "b"}
    assert assign_replicas(brokers, 3, 3, start=0, shift=0) == assign_replicas(
        dict.fromkeys(brokers), 3, 3, start=0, shift=0
    )
