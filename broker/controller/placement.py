"""Where a new partition's replicas go: Kafka's replica assignment (``AdminUtils.assignReplicasToBrokers``).

Rack-unaware: the first replica of partition ``p`` goes to broker ``(p + start) % n``; the others follow at a shift
that grows by one every ``n`` partitions, so the followers of one broker's leaders spread over every other broker.
Rack-aware when every broker has ``broker.rack`` (else rack-unaware, Kafka's ``RackAwareMode.Safe``): the same
walk over the brokers listed alternating by rack, skipping a broker whose rack (or itself) already holds a replica of
the partition until every rack (broker) holds one. ``start`` and ``shift`` are random in Kafka and may be fixed
here for tests.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

from oncelog.broker.metadata import NON_POSITIVE_REPLICATION_FACTOR
from oncelog.protocol.errors import ErrorCode

from .refused import Refused


def assign_replicas(
    brokers: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    *,
    first_partition: int = 0,
    start: int | None = None,
    shift: int | None = None,
) -> dict[int, list[int]]:
    """Replicas (leader first) of partitions ``first_partition ..`` over ``brokers`` (id -> rack or None)."""
    if replication_factor <= 0:
        raise Refused(ErrorCode.INVALID_REPLICATION_FACTOR, NON_POSITIVE_REPLICATION_FACTOR)
    if replication_factor > len(brokers):
        raise Refused(
            ErrorCode.INVALID_REPLICATION_FACTOR,
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}.",
        )
    racks = list(brokers.values())
    rng = random.Random()
    ordered = _rack_alternated(brokers) if all(racks) else sorted(brokers)
    n = len(ordered)
    start = rng.randrange(n) if start is None else start
    shift = rng.randrange(n) if shift is None else shift
    rack_count = len(set(racks)) if all(racks) else 0
    assignment: dict[int, list[int]] = {}
    for partition in range(first_partition, first_partition + partitions):
        if partition > 0 and partition % n == 0:
            shift += 1
        first = (partition + start) % n
        if rack_count:
            assignment[partition] = _rack_aware_replicas(
                ordered, brokers, first, shift * rack_count, replication_factor
            )
        else:
            assignment[partition] = [ordered[first]] + [
                ordered[_follower_index(first, shift, j, n)] for j in range(replication_factor - 1)
            ]
    return assignment


def _follower_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def _rack_alternated(brokers: Mapping[int, str | None]) -> list[int]:
    """Broker ids taken one per rack in turn (racks and the brokers in each in sorted order)."""
    by_rack: dict[str, list[int]] = {}
    for broker_id in sorted(brokers):
        by_rack.setdefault(str(brokers[broker_id]), []).append(broker_id)
    columns = [by_rack[rack] for rack in sorted(by_rack)]
    ordered: list[int] = []
    for row in range(max(len(column) for column in columns)):
        ordered.extend(column[row] for column in columns if row < len(column))
    return ordered


def _rack_aware_replicas(
    ordered: Sequence[int], racks: Mapping[int, str | None], first: int, shift: int, replication_factor: int
) -> list[int]:
    n = len(ordered)
    rack_count = len(set(racks.values()))
    replicas = [ordered[first]]
    racks_used = {racks[ordered[first]]}
    k = 0
    while len(replicas) < replication_factor:
        candidate = ordered[_follower_index(first, shift, k, n)]
        k += 1
        rack_ok = racks[candidate] not in racks_used or len(racks_used) == rack_count
        broker_ok = candidate not in replicas or len(replicas) == n
        if rack_ok and broker_ok:
            replicas.append(candidate)
            racks_used.add(racks[candidate])
    return replicas
