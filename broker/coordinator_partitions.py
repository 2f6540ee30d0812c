"""Which partitions of a coordinator's internal topic (``__transaction_state``, ``__consumer_offsets``) this broker
coordinates: Kafka's loading and unloading of coordinator state on leadership changes, for either coordinator.

Guarantees:
- A partition is *owned* (its keys served here) only while this broker leads it, at the leader epoch it was loaded
  at: that epoch is the coordinator epoch. The single node leads every partition without a state and loads them
  all before serving (``load_unassigned``); a cluster member loads a partition when it becomes its leader.
- Loading replays the local replica through the coordinator's ``load`` generator, which yields between bounded
  steps; requests run between steps and are answered COORDINATOR_LOAD_IN_PROGRESS for the partition's keys. A load
  overtaken by a role change installs nothing.
- When the partition stops being led here (or is led again under a newer epoch) the coordinator's ``unload`` runs
  at once, inside the role change, before anything else can see it; its keys are then answered NOT_COORDINATOR.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any

import structlog
import trio
from oncelog.broker.replication.partitions import Transition
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.replica_manager import ReplicaManager

log = structlog.get_logger(__name__)

#: Records a coordinator replays per step while loading a partition, between checkpoints that let requests run.
LOAD_STEP_RECORDS = 1000
#: A coordinator's replay of one partition: yields between bounded steps, returns what ``install`` takes.
LoadSteps = Generator[None, None, Any]


def run_steps(steps: LoadSteps) -> Any:
    """Run a replay to its end at once (before serving) and return its result."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


class CoordinatorPartitions:
    """Ownership of one internal topic's partitions by this broker's coordinator of it."""

    def __init__(
        self,
        topic: str,
        replicas: ReplicaManager,
        *,
        load: Callable[[int], LoadSteps],
        install: Callable[[int, int, Any], None],
        unload: Callable[[int], None],
        after_load: Callable[[int, int], Awaitable[None]] | None = None,
    ) -> None:
        """``load(partition)`` replays it; ``install(partition, epoch, loaded)`` makes the result current;
        ``unload(partition)`` drops it; ``after_load(partition, epoch)`` runs in the background once installed."""
        self.topic = topic
        self._replicas = replicas
        self._load = load
        self._install = install
        self._unload = unload
        self._after_load = after_load
        #: Partitions loaded here, with their coordinator epoch.
        self.owned: dict[int, int] = {}
        #: Partitions led here that are being loaded, with the epoch they are loaded at.
        self.loading: dict[int, int] = {}
        self._wanted = trio.Event()
        replicas.add_role_listener(self._on_role)

    def load_unassigned(self, partitions: int) -> None:
        """Load, blocking, every partition this broker leads without an applied state (all of them on the single
        node, none on a cluster member)."""
        for partition in range(partitions):
            if self._replicas.roles.get((self.topic, partition)) is None and self._replicas.leads(
                self.topic, partition
            ):
                epoch = self._replicas.leader_epoch(self.topic, partition)
                self._install(partition, epoch, run_steps(self._load(partition)))
                self.owned[partition] = epoch

    def status(self, partition: int) -> ErrorCode:
        """NONE when owned, COORDINATOR_LOAD_IN_PROGRESS while loading, else NOT_COORDINATOR."""
        if partition in self.owned:
            return ErrorCode.NONE
        if partition in self.loading:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NOT_COORDINATOR

    def _on_role(self, topic: str, partition: int, transition: Transition, leader_epoch: int) -> None:
        if topic != self.topic:
            return
        was_owned = self.owned.pop(partition, None) is not None
        self.loading.pop(partition, None)
        self._unload(partition)
        if was_owned:
            log.info("coordinator_partition_unloaded", topic=topic, partition=partition)
        if transition is Transition.BECAME_LEADER:
            self.loading[partition] = leader_epoch
            self._wanted.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Load each partition this broker comes to lead, one at a time, until cancelled."""
        async with trio.open_nursery() as nursery:
            task_status.started()
            while True:
                await self._wanted.wait()
                self._wanted = trio.Event()
                for partition, epoch in sorted(self.loading.items()):
                    if await self._load_partition(partition, epoch) and self._after_load is not None:
                        nursery.start_soon(self._after_load, partition, epoch)

    async def _load_partition(self, partition: int, epoch: int) -> bool:
        """Replay the partition a step at a time; False when it stopped being led at ``epoch`` meanwhile."""
        started = trio.current_time()
        steps = self._load(partition)
        while self.loading.get(partition) == epoch:
            try:
                next(steps)
            except StopIteration as done:
                del self.loading[partition]
                self._install(partition, epoch, done.value)
                self.owned[partition] = epoch
                log.info(
                    "coordinator_partition_loaded",
                    topic=self.topic,
                    partition=partition,
                    coordinator_epoch=epoch,
                    seconds=round(trio.current_time() - started, 3),
                )
                return True
            await trio.sleep(0)
        return False
