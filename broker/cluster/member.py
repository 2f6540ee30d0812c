"""A broker's membership of the cluster: one etcd session, the broker's registration under it, the metadata image
it follows, and its candidacy for the controller role.

Lifetime (``run``): read or set the cluster id, follow the metadata, then per session: grant a lease, register
(``ROOT/brokers/<id>`` with the broker's advertised endpoints) and campaign for the controller while the lease lives.
When the session is lost (etcd says the lease expired, or no renewal got through for a whole TTL), etcd has already
deleted the registration and the controller key: ``on_fenced`` is called at once, so the broker stops acting as
leader of anything (another broker may be leading its partitions already), and a new session starts. The image is
followed across sessions: a broker that cannot reach etcd keeps serving what it leads until its session is lost.
"""

from __future__ import annotations

from collections.abc import Callable

import structlog
import trio
from oncelog.broker.controller.controller import ClusterController, controlled_shutdown
from oncelog.broker.controller.partition_change import NO_LEADER, PartitionState, elect_leader, elect_preferred
from oncelog.broker.controller.refused import Refused
from oncelog.broker.etcd.client import Compare, Delete, EtcdClient, EtcdError, Get, KeyValue, Put
from oncelog.broker.etcd.image import MetadataFollower, MetadataImage
from oncelog.broker.etcd.layout import BrokerRegistration, Layout
from oncelog.broker.etcd.session import EtcdSession, SessionLost
from oncelog.broker.etcd.topics import new_topic_id
from oncelog.protocol.errors import ErrorCode

log = structlog.get_logger(__name__)

#: How long to wait before starting a new session after one was lost or could not be started.
SESSION_RETRY_S = 1.0


class ClusterMember:
    """One broker's part in the cluster; ``image`` is the cluster as last read from etcd."""

    def __init__(
        self,
        client: EtcdClient,
        layout: Layout,
        *,
        broker_id: int,
        session_timeout_ms: int,
        controller_options: dict[str, object],
        on_fenced: Callable[[], None],
    ) -> None:
        """``controller_options`` are ``ClusterController``'s keyword settings (rebalance, unclean election);
        ``on_fenced`` is called when the session is lost, before anything else happens."""
        self.client = client
        self.layout = layout
        self.broker_id = broker_id
        self.follower = MetadataFollower(client, layout)
        self._session_timeout_ms = session_timeout_ms
        self._controller_options = controller_options
        self._on_fenced = on_fenced
        self.cluster_id: str | None = None
        #: Set while this broker holds a live session and its registration is in etcd.
        self.registered = False
        #: The lease of the latest session's registration.
        self._lease_id = 0

    @property
    def image(self) -> MetadataImage:
        return self.follower.image

    @property
    def incarnation(self) -> int:
        """The lease of this broker's latest registration (KIP-903's broker epoch); 0 before the first."""
        return self._lease_id

    async def run(
        self, registration: BrokerRegistration, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Be a member until cancelled; reports started once registered and once the image shows the registration."""
        self.cluster_id = await self._cluster_id()
        async with trio.open_nursery() as nursery:
            await nursery.start(self.follower.run)
            while True:
                try:
                    await self._session(registration, task_status)
                except* SessionLost:
                    pass
                except* EtcdError as failed:
                    log.warning("cluster session could not start; retrying", error=str(failed.exceptions[0]))
                task_status = trio.TASK_STATUS_IGNORED
                if self.registered:
                    self.registered = False
                    self._on_fenced()
                await trio.sleep(SESSION_RETRY_S)

    async def _session(self, registration: BrokerRegistration, task_status: trio.TaskStatus[None]) -> None:
        session = EtcdSession(self.client, session_timeout_ms=self._session_timeout_ms)
        lease = await session.start()
        key = self.layout.broker(self.broker_id)
        # The registration read and replaced in one transaction: what it replaced tells an unclean restart.
        # A new session is no controlled shutdown (a mark a previous incarnation left would lapse with its lease).
        shutting_down = Delete(self.layout.shutting_down(self.broker_id))
        swapped = await self.client.txn(
            [], [Get(key), Put(key, registration.to_json(), lease=lease.id), shutting_down], []
        )
        self.registered = True
        self._lease_id = lease.id
        log.info("registered", broker_id=self.broker_id, lease=lease.id, ttl_s=session.ttl_s)
        previous = swapped.ranges[0][0] if swapped.ranges and swapped.ranges[0] else None
        if previous is not None and previous.lease != lease.id:
            await self._leave_as_previous_incarnation(previous.lease)
        controller = ClusterController(
            self.client,
            self.layout,
            self.follower,
            broker_id=self.broker_id,
            lease_id=lease.id,
            **self._controller_options,  # type: ignore[arg-type]
        )
        async with trio.open_nursery() as nursery:
            nursery.start_soon(session.run)
            image = self.image
            while self.broker_id not in image.brokers:
                image = await self.follower.next_image(after=image.revision)
            nursery.start_soon(controller.run)
            task_status.started()

    async def _leave_as_previous_incarnation(self, previous_lease: int) -> None:
        """KIP-966's unclean shutdown: this broker registered while its previous incarnation's registration (lease)
        still lived, so that process ended without a controlled shutdown and within the session timeout. The ISR
        entries and leaderships naming this broker are that incarnation's, whose unflushed tail this process may
        lack: they go, as in a controlled shutdown (the last member of an ISR stays, as when a lease lapses), after
        the new registration, so no ISR change proposed for the old incarnation is accepted any more. This broker
        rejoins each ISR by the normal expansion once caught up under its new incarnation."""
        moved = await controlled_shutdown(self.client, self.layout, self.image, self.broker_id)
        log.warning("registered over a live previous incarnation", previous_lease=previous_lease, partitions=moved)

    async def shut_down(self, timeout_s: float) -> int:
        """Controlled shutdown: mark this broker as shutting down (no ISR expansion takes it in again, Kafka's
        INELIGIBLE_REPLICA for a replica of a broker in controlled shutdown, though it keeps fetching until it
        stops), move every leadership and ISR membership of this broker to others and wait (up to
        ``timeout_s``) until the image shows it, so clients find the new leaders before this broker stops. Returns
        how many partitions still list this broker as leader (0 when it all moved)."""
        with trio.move_on_after(timeout_s):
            try:
                if self.registered:  # while it lasts, no leader takes this broker back into an ISR (KIP-966)
                    await self.client.put(self.layout.shutting_down(self.broker_id), b"", lease=self._lease_id)
                await controlled_shutdown(self.client, self.layout, self.image, self.broker_id)
            except EtcdError as exc:
                log.warning("controlled shutdown could not reach etcd", error=str(exc))
                return len(self._led())
            image = self.image
            while self._led(image):
                image = await self.follower.next_image(after=image.revision)
        return len(self._led())

    def _led(self, image: MetadataImage | None = None) -> list[tuple[str, int]]:
        image = image or self.image
        return [tp for tp, state in image.topic_partitions().items() if state.leader == self.broker_id]

    async def elect_leaders(
        self, partitions: list[tuple[str, int]], *, unclean: bool
    ) -> dict[tuple[str, int], Refused | None]:
        """ElectLeaders: a preferred election (leadership to the first replica, if alive and in sync) or an unclean
        one (a partition without a leader gets the first live replica); per partition None when done, else the
        refusal with Kafka's code (ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE, ...). Each change is a
        guarded write of the partition's key, as the controller's own."""
        image = self.image
        live = image.active_brokers()
        results: dict[tuple[str, int], Refused | None] = {}
        for topic, index in partitions:
            record = image.topics.get(topic)
            if record is None or not 0 <= index < record.partitions:
                what = f"topic as {topic}" if record is None else f"partition as {topic}-{index}"
                results[(topic, index)] = Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such {what}")
                continue

            def change(kv: KeyValue | None, topic: str = topic, index: int = index) -> bytes:
                if kv is None:
                    raise Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic}-{index}")
                state = PartitionState.from_json(kv.value)
                if not unclean:
                    return elect_preferred(state, live).to_json()
                if state.leader != NO_LEADER:
                    raise Refused(ErrorCode.ELECTION_NOT_NEEDED, "Leader election not needed for topic partition.")
                elected = elect_leader(state, live, unclean=True)
                if elected.leader == NO_LEADER:
                    raise Refused(ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, f"No live replica of {topic}-{index}")
                return elected.to_json()

            try:
                await self.client.update(self.layout.partition(record.topic_id, index), change)
                results[(topic, index)] = None
            except Refused as refused:
                results[(topic, index)] = refused
        return results

    async def store_scram_credentials(self, payload: bytes, timeout_s: float) -> bool:
        """Store the cluster's SCRAM credentials (AlterUserScramCredentials); True once this broker's image has
        them (every broker's does shortly after)."""
        await self.client.put(self.layout.scram_credentials, payload)
        with trio.move_on_after(timeout_s):
            image = self.image
            while image.scram_credentials != payload:
                image = await self.follower.next_image(after=image.revision)
            return True
        return False

    async def _cluster_id(self) -> str:
        """The cluster's id: read, or written by the first broker ever (create-if-absent, so all agree)."""
        key = self.layout.cluster_id
        while True:
            try:
                result = await self.client.txn([Compare.absent(key)], [Put(key, new_topic_id().encode())], [Get(key)])
                if result.succeeded:
                    value = await self.client.get(key)
                    assert value is not None
                    return value.value.decode()
                return result.ranges[0][0].value.decode()
            except EtcdError as exc:
                log.warning("etcd unreachable while reading the cluster id; retrying", error=str(exc))
                await trio.sleep(SESSION_RETRY_S)
