"""An in-memory controller for replication tests: partition states in a dict, each ISR change checked by
``partition_change.alter_isr`` (Kafka's AlterPartition refusals), as the etcd controller checks it under a version
compare. ``live`` is the set of brokers the controller believes alive (INELIGIBLE_REPLICA for others joining), and
``incarnations`` their registrations (a broker not listed is ``SINGLE_INCARNATION``; INELIGIBLE_REPLICA for a joining
broker that fetched as another one)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import trio
from oncelog.broker.controller.partition_change import PartitionState, alter_isr
from oncelog.broker.controller.refused import Refused
from oncelog.broker.replication.leader_state import SINGLE_INCARNATION
from oncelog.protocol import ErrorCode


class InMemoryIsrUpdater:
    """Implements ``broker.replication.isr.IsrUpdater``; ``changes`` lists every accepted state, in order."""

    def __init__(self, live: Iterable[int]) -> None:
        self.live = set(live)
        self.incarnations: dict[int, int] = {}
        self.states: dict[tuple[str, int], PartitionState] = {}
        self.changes: list[tuple[str, int, PartitionState]] = []
        self.changed = trio.Event()

    def set(self, topic: str, partition: int, state: PartitionState) -> PartitionState:
        """Store ``state`` as the controller's current one (an election made by the test)."""
        self.states[(topic, partition)] = state
        return state

    async def alter_isr(
        self, topic: str, partition: int, proposed: PartitionState, joining: Mapping[int, int]
    ) -> PartitionState | Refused:
        await trio.lowlevel.checkpoint()
        stale = [b for b, incarnation in joining.items() if self.incarnations.get(b, SINGLE_INCARNATION) != incarnation]
        if stale:
            return Refused(ErrorCode.INELIGIBLE_REPLICA, f"replicas {stale} registered again")
        current = self.states[(topic, partition)]
        try:
            stored = alter_isr(
                current,
                broker=proposed.leader,
                leader_epoch=proposed.leader_epoch,
                partition_epoch=proposed.partition_epoch,
                new_isr=proposed.isr,
                live=self.live,
            )
        except Refused as refused:
            return refused
        self.states[(topic, partition)] = stored
        self.changes.append((topic, partition, stored))
        self.changed.set()
        self.changed = trio.Event()
        return stored
