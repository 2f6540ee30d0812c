"""The cluster controller: one broker at a time, elected through etcd, keeps every partition led.

Every broker runs ``ClusterController.run``; it campaigns for the controller key and, once elected, acts on each
new metadata image: a partition whose leader is gone (its broker's lease lapsed) gets a new one from the ISR
(``partition_change.elect_leader``), and, with ``auto.leader.rebalance.enable``, leadership goes back to preferred
replicas every ``leader.imbalance.check.interval.seconds`` for brokers whose share of lost leaderships is above
``leader.imbalance.per.broker.percentage``. Only active brokers (``MetadataImage.active_brokers``: registered, not in
controlled shutdown) are elected or kept in an ISR (but for its last member), as Kafka's controller elects no broker
in controlled shutdown: a partition whose last in-sync replica is shutting down stays without a leader rather than
be handed back to it. Each write is guarded by the partition key's revision and by the controller key's create
revision (the controller epoch), so a controller deposed while it was deciding writes nothing: its transaction fails
and it campaigns again.

``controlled_shutdown`` is what a broker stopping on purpose does before it ends its session: it leaves every ISR
and gives every leadership away, so clients see a new leader before the broker goes.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Callable

import structlog
import trio
from oncelog.broker.etcd.client import Compare, CompareTarget, EtcdClient, EtcdError, GuardFailed, KeyValue
from oncelog.broker.etcd.election import Controller, ControllerElection
from oncelog.broker.etcd.image import MetadataFollower, MetadataImage
from oncelog.broker.etcd.layout import Layout

from .partition_change import PartitionState, elect_leader, elect_preferred, shut_down
from .refused import Refused

log = structlog.get_logger(__name__)

#: Kafka's defaults of the properties of the same names.
AUTO_LEADER_REBALANCE_ENABLE = True
LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS = 300
LEADER_IMBALANCE_PER_BROKER_PERCENTAGE = 10
UNCLEAN_LEADER_ELECTION_ENABLE = False
#: Wait before campaigning again after etcd could not be reached.
ETCD_RETRY_S = 0.5
#: How many partition writes the controller keeps in flight at once (each is one etcd round trip and fsync).
CONCURRENT_WRITES = 32


class _Gone(Exception):
    """The partition was deleted while the controller was changing it."""


class ClusterController:
    """One broker's part in controlling the cluster; decisions only while elected."""

    def __init__(
        self,
        client: EtcdClient,
        layout: Layout,
        follower: MetadataFollower,
        *,
        broker_id: int,
        lease_id: int,
        auto_rebalance: bool = AUTO_LEADER_REBALANCE_ENABLE,
        rebalance_interval_s: float = LEADER_IMBALANCE_CHECK_INTERVAL_SECONDS,
        imbalance_percentage: int = LEADER_IMBALANCE_PER_BROKER_PERCENTAGE,
        unclean_default: bool = UNCLEAN_LEADER_ELECTION_ENABLE,
    ) -> None:
        self._client = client
        self._layout = layout
        self._follower = follower
        self._election = ControllerElection(client, layout.controller, broker_id=broker_id, lease_id=lease_id)
        self._auto_rebalance = auto_rebalance
        self._rebalance_interval_s = rebalance_interval_s
        self._imbalance_percentage = imbalance_percentage
        self._unclean_default = unclean_default
        #: The epoch while this broker is the controller, else None.
        self.epoch: int | None = None

    async def run(self) -> None:
        """Campaign, control while elected, campaign again when deposed or when etcd could not be reached (etcd
        unavailable is not a lost session: that is ``SessionLost``, raised); until cancelled."""
        while True:
            try:
                elected = await self._election.campaign()
            except EtcdError as exc:
                log.warning("campaign interrupted; retrying", error=str(exc))
                await trio.sleep(ETCD_RETRY_S)
                continue
            self.epoch = elected.epoch
            log.info("elected cluster controller", epoch=elected.epoch)
            try:
                await self._control(elected)
            except* GuardFailed:
                log.warning("no longer the cluster controller", epoch=elected.epoch)
            except* EtcdError as failed:
                log.warning("controller lost etcd; campaigning again", error=str(failed.exceptions[0]))
                await trio.sleep(ETCD_RETRY_S)
            finally:
                self.epoch = None

    async def _control(self, elected: Controller) -> None:
        guard = Compare(self._layout.controller, CompareTarget.CREATE, "==", elected.epoch)
        async with trio.open_nursery() as nursery:
            if self._auto_rebalance:
                nursery.start_soon(self._rebalance_periodically, guard)
            image = self._follower.image
            while True:
                await self.elect_leaders(image, guard)
                image = await self._follower.next_image(after=image.revision)

    async def elect_leaders(self, image: MetadataImage, guard: Compare) -> None:
        """Give every partition whose leader or ISR members are gone (or in controlled shutdown) its new state."""
        live = image.active_brokers()
        changes: dict[tuple[str, int], Callable[[PartitionState], PartitionState]] = {}
        for (topic, index), state in image.topic_partitions().items():
            unclean = self._unclean(image, topic)
            if elect_leader(state, live, unclean=unclean) != state:
                changes[(topic, index)] = lambda s, unclean=unclean: elect_leader(s, live, unclean=unclean)
        await apply_partition_changes(self._client, self._layout, image, changes, [guard])

    async def rebalance_leaders(self, image: MetadataImage, guard: Compare) -> None:
        """Preferred leader election for brokers whose share of partitions led elsewhere is above the threshold."""
        live = image.active_brokers()
        preferred_total: Counter[int] = Counter()
        movable: dict[int, list[tuple[str, int]]] = {}
        for tp, state in image.topic_partitions().items():
            preferred = state.replicas[0]
            preferred_total[preferred] += 1
            if state.leader != preferred and preferred in state.isr and preferred in live:
                movable.setdefault(preferred, []).append(tp)
        changes: dict[tuple[str, int], Callable[[PartitionState], PartitionState]] = {}
        for broker, partitions in movable.items():
            if len(partitions) * 100 > self._imbalance_percentage * preferred_total[broker]:
                changes.update({tp: lambda s: elect_preferred(s, live) for tp in partitions})
        await apply_partition_changes(self._client, self._layout, image, changes, [guard])

    async def _rebalance_periodically(self, guard: Compare) -> None:
        while True:
            await trio.sleep(self._rebalance_interval_s)
            await self.rebalance_leaders(self._follower.image, guard)

    def _unclean(self, image: MetadataImage, topic: str) -> bool:
        value = image.topics[topic].configs.get("unclean.leader.election.enable")
        return self._unclean_default if value is None else value.lower() == "true"


async def controlled_shutdown(client: EtcdClient, layout: Layout, image: MetadataImage, broker_id: int) -> int:
    """Move every leadership and ISR membership of ``broker_id`` away (to no broker in controlled shutdown); how many
    partitions changed."""
    live = image.active_brokers() | {broker_id}
    changes: dict[tuple[str, int], Callable[[PartitionState], PartitionState]] = {
        tp: lambda s: shut_down(s, broker_id, live)
        for tp, state in image.replicas_on(broker_id).items()
        if shut_down(state, broker_id, live) != state
    }
    await apply_partition_changes(client, layout, image, changes, [])
    return len(changes)


async def apply_partition_changes(
    client: EtcdClient,
    layout: Layout,
    image: MetadataImage,
    changes: dict[tuple[str, int], Callable[[PartitionState], PartitionState]],
    guards: list[Compare],
) -> None:
    """Apply each change to the partition's current state in etcd (re-read on conflict), a few at a time. A change
    that no longer applies to the current state (it raises ``Refused``: a preferred replica that leads already,
    the state having moved on since ``image``) is skipped, as is a partition deleted meanwhile."""
    limiter = trio.CapacityLimiter(CONCURRENT_WRITES)

    async def apply(topic: str, index: int, change: Callable[[PartitionState], PartitionState]) -> None:
        def compute(kv: KeyValue | None) -> bytes:
            if kv is None:
                raise _Gone
            return change(PartitionState.from_json(kv.value)).to_json()

        async with limiter:
            with contextlib.suppress(_Gone, Refused):
                await client.update(layout.partition(image.topics[topic].topic_id, index), compute, guards=guards)

    try:
        async with trio.open_nursery() as nursery:
            for (topic, index), change in changes.items():
                nursery.start_soon(apply, topic, index, change)
    except* GuardFailed as fenced:
        raise fenced.exceptions[0] from None  # the writer was fenced: one reason, however many writes saw it
