"""A single broker node: owns the data dir, the partition logs and every background task, and serves clients.

Lifetime: ``run`` loads state (recovering logs after an unclean stop), starts the flusher, retention and checkpoint
tasks and the listener in one nursery; cancelling ``run`` (SIGTERM/SIGINT in the CLI) leaves that nursery and then
closes the logs cleanly (flush, producer snapshots, checkpoints, clean-shutdown marker).
"""

from __future__ import annotations

import errno
import ssl
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import structlog
import trio
from oncelog.broker import fd_budget
from oncelog.broker.clock import now_ms
from oncelog.broker.cluster.isr import EtcdIsrUpdater
from oncelog.broker.cluster.liveness import DeadBrokerDetector
from oncelog.broker.cluster.local_follower import LocalFollower
from oncelog.broker.cluster.markers import MarkerChannel
from oncelog.broker.cluster.member import ClusterMember
from oncelog.broker.cluster.peers import PeerConnections
from oncelog.broker.cluster.producer_ids import ClusterProducerIds
from oncelog.broker.cluster.topic_store import EtcdTopicStore
from oncelog.broker.cluster.view import ClusterView, ImageView, SingleNodeView
from oncelog.broker.config import BrokerConfig, ConfigError
from oncelog.broker.delay.embedded import embedded_service
from oncelog.broker.dynamic_config import DYNAMIC_CONFIGS_FILE, DynamicBrokerConfigs
from oncelog.broker.etcd.client import EtcdClient
from oncelog.broker.etcd.connect import EtcdConnectError, parse_etcd_connect
from oncelog.broker.etcd.layout import BrokerRegistration, Layout
from oncelog.broker.etcd.producer_id_blocks import claim_block
from oncelog.broker.fetch_sessions import FetchSessions
from oncelog.broker.flusher import LogFlusher
from oncelog.broker.group.consumer_coordinator import ConsumerGroupCoordinator
from oncelog.broker.group.coordinator import GroupCoordinator
from oncelog.broker.group_configs import GroupConfigs
from oncelog.broker.listeners import (
    Endpoint,
    Listener,
    advertised_address,
    parse_advertised,
    parse_listeners,
    parse_protocol_map,
)
from oncelog.broker.log_compactor import LogCompactor
from oncelog.broker.metadata import CONSUMER_OFFSETS_TOPIC, INTERNAL_TOPIC_CONFIGS, MetadataStore
from oncelog.broker.producer_ids import ProducerIdAllocator
from oncelog.broker.replica_manager import ReplicaManager
from oncelog.broker.replication.fetcher import FetcherSettings, ReplicaFetcherManager
from oncelog.broker.replication.fetcher_identity import RegisteredFetcherCheck
from oncelog.broker.replication.isr import IsrMaintenance, IsrUpdater
from oncelog.broker.request_budget import RequestBudget
from oncelog.broker.sasl.config import SaslListenerConfig, sasl_listener_config
from oncelog.broker.sasl.credentials import ScramCredentialStore
from oncelog.broker.server import ServerContext, serve
from oncelog.broker.startup import DataDirLock
from oncelog.broker.tls import server_context
from oncelog.broker.topic_configs import ConfigChangeError
from oncelog.broker.topics import TopicManager
from oncelog.broker.txn.coordinator import TransactionCoordinator
from oncelog.broker.txn.markers import LocalMarkerWriter, MarkerWriter
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import StorageError
from oncelog.storage.log import PartitionLog
from oncelog.storage.log_manager import LogManager

log = structlog.get_logger(__name__)

#: How long a controlled shutdown waits for its leaderships to move before the broker stops anyway.
CONTROLLED_SHUTDOWN_TIMEOUT_S = 10.0
#: How long a broker keeps serving after its controlled shutdown moved its leaderships, before it closes.
HAND_OVER_LINGER_S = 0.5
#: How long closing the etcd client (its HTTP connections) may take when the broker stops.
ETCD_CLOSE_TIMEOUT_S = 1.0


class BrokerNode:
    """Composition root of the broker: builds the components, wires them and owns their lifetimes. No component
    holds it; request handlers are given it as their ``services.Broker``."""

    def __init__(
        self,
        config: BrokerConfig,
        listen: Endpoint | None = None,
        advertise: Endpoint | None = None,
        *,
        endpoint_of: Callable[[int], Endpoint | None] | None = None,
        isr_updater: IsrUpdater | None = None,
    ) -> None:
        """Listeners come from ``listeners`` / ``advertised.listeners`` / ``listener.security.protocol.map``;
        ``listen`` / ``advertise`` (the old single-listener form) replace them with one PLAINTEXT listener.
        Raises ConfigError for listeners or SASL settings Kafka would refuse or this broker cannot serve.

        A cluster member is given ``endpoint_of`` (another broker's inter-broker listener address: followers fetch
        from it) and ``isr_updater`` (the controller's AlterPartition); partition roles then come from
        ``replicas.apply_partition_state``. Without them the node is the single node: it leads every partition."""
        #: The properties file and command line; ``config`` is it with the dynamic configs applied.
        self.static_config = config
        self.node_id = config.get_int("node.id")
        self.data_dir = Path(config.get_str("log.dirs"))
        self.dynamic_configs = DynamicBrokerConfigs(self.data_dir)
        try:
            config = self.dynamic_configs.effective(config, self.dynamic_configs.cluster, self.dynamic_configs.broker)
        except ConfigChangeError as exc:
            raise ConfigError(f"{DYNAMIC_CONFIGS_FILE}: {exc.message}") from None
        self.config = config
        protocol_map = parse_protocol_map(config.get_str("listener.security.protocol.map"))
        if listen is not None:
            text = f"{listen.name or 'PLAINTEXT'}://[{listen.host}]:{listen.port}"
            self.listeners: list[Listener] = parse_listeners(text, protocol_map)
        else:
            self.listeners = parse_listeners(config.get_str("listeners"), protocol_map)
        advertised_text = config.get_str("advertised.listeners")
        if advertise is not None:
            advertised_text = f"{advertise.name or self.listeners[0].name}://[{advertise.host}]:{advertise.port}"
        self._advertised = parse_advertised(advertised_text, self.listeners)
        #: Per SASL listener name: its mechanisms and their server-side settings.
        self.sasl: dict[str, SaslListenerConfig] = {
            listener.name: sasl_listener_config(config, listener) for listener in self.listeners if listener.uses_sasl
        }
        #: Each listener's bound port once serving (its configured port, or the one the OS chose for port 0).
        self.bound_ports: dict[str, int] = {}
        #: Per SSL or SASL_SSL listener name: its TLS context, from the ``ssl.*`` settings with the listener's own
        #: ``listener.name.<listener>.ssl.*`` in their place; built here so bad settings stop the start.
        self.ssl_contexts: dict[str, ssl.SSLContext] = {
            lst.name: server_context(config.for_listener(lst.config_prefix)) for lst in self.listeners if lst.uses_tls
        }
        self.metadata = MetadataStore(self.data_dir)
        self.logs = LogManager(self.data_dir, config.log_config())
        self.flusher = LogFlusher(
            scheduler_interval_ms=config.get_int("log.flush.scheduler.interval.ms"),
            on_high_watermark=self._high_watermark_advanced,
            high_watermark_for=self._high_watermark_for,
        )
        #: This broker's membership of an etcd cluster (``etcd.connect``), None on a single node.
        self.member: ClusterMember | None = None
        etcd: tuple[EtcdClient, Layout] | None = None
        if config.get_str("etcd.connect"):
            etcd = self._etcd(config)
            self.member = self._membership(config, *etcd)
            endpoint_of = endpoint_of or self._inter_broker_endpoint
            etcd_isr = EtcdIsrUpdater(*etcd, self.member, self.node_id)
            isr_updater = isr_updater or etcd_isr
        lag_time_max_ms = config.get_int("replica.lag.time.max.ms")
        self.replicas = ReplicaManager(
            self.logs,
            self.flusher,
            node_id=self.node_id,
            lag_time_max_ms=lag_time_max_ms,
            # A cluster member leads only what the cluster's metadata says; a single node leads every partition.
            lead_unassigned=self.member is None,
        )
        self.fetch_sessions = FetchSessions(
            config.get_int("max.incremental.fetch.session.cache.slots"), on_close=self.replicas.release_session
        )
        #: The etcd client of a cluster member (closed when the node stops).
        self._etcd_client: EtcdClient | None = etcd[0] if etcd is not None else None
        if etcd is not None:
            # A follower's fetch counts for the registration (lease) it runs under now (KIP-903's broker epoch).
            self.replicas.incarnation_of = etcd_isr.incarnation_of
        self.inter_broker_listener = config.get_str("inter.broker.listener.name") or self.listeners[0].name
        if all(lst.name != self.inter_broker_listener for lst in self.listeners):
            raise ConfigError(f"inter.broker.listener.name {self.inter_broker_listener} is not a listener")
        #: Ends a dead broker's etcd session early when its address refuses connections (cluster members only).
        self._liveness: DeadBrokerDetector | None = None
        if etcd is not None and self.member is not None:
            member = self.member
            self._liveness = DeadBrokerDetector(
                etcd[0], lambda: member.image, self.inter_broker_listener, node_id=self.node_id
            )
        #: Followers' fetchers (cluster members only).
        self.replica_fetchers: ReplicaFetcherManager | None = None
        if endpoint_of is not None:
            self.replica_fetchers = ReplicaFetcherManager(
                node_id=self.node_id,
                endpoint_of=endpoint_of,
                local=self.replicas,
                settings=FetcherSettings(
                    max_bytes=config.get_int("replica.fetch.max.bytes"),
                    response_max_bytes=config.get_int("replica.fetch.response.max.bytes"),
                    wait_max_ms=config.get_int("replica.fetch.wait.max.ms"),
                    min_bytes=config.get_int("replica.fetch.min.bytes"),
                    backoff_ms=config.get_int("replica.fetch.backoff.ms"),
                ),
                clock_ms=now_ms,
                on_leader_lost=self._liveness.suspect if self._liveness is not None else None,
                incarnation=(lambda member=self.member: member.incarnation) if self.member is not None else lambda: 0,
            )
            self.replicas.fetchers = self.replica_fetchers
        #: The leader's ISR changes (cluster members only).
        self.isr_maintenance: IsrMaintenance | None = None
        if isr_updater is not None:
            self.isr_maintenance = IsrMaintenance(
                self.replicas.roles,
                isr_updater,
                log_end_offset=self._log_end_offset,
                adopt=self.replicas.adopt_isr,
                clock_ms=now_ms,
                lag_time_max_ms=lag_time_max_ms,
                incarnation_of=self.replicas.incarnation_of,
            )
            self.replicas.on_isr_expandable = self.isr_maintenance.poke
        self.producer_ids: ProducerIdAllocator | ClusterProducerIds = ProducerIdAllocator(
            self.data_dir / "producer-id-block"
        )
        #: Topics whose deletion is under way (kept by ``topics``; the group coordinator refuses offsets of them).
        deleting_topics: set[str] = set()
        self.groups = GroupCoordinator(
            config,
            self.metadata,
            self.logs,
            self.replicas,
            clock_ms=now_ms,
            ensure_offsets_topic=self.ensure_offsets_topic,
            deleting_topics=deleting_topics,
        )
        self.topics = TopicManager(
            config,
            self.metadata,
            self.logs,
            self.replicas,
            self.flusher,
            log_config_for=self.topic_log_config,
            group_offsets=self.groups,
            deleting=deleting_topics,
        )
        #: Brokers, controller and partition states as Metadata and the tools report them.
        self.cluster: ClusterView = SingleNodeView(
            self.node_id,
            lambda listener: (self.advertised_for(listener).host, self.advertised_for(listener).port),
            lambda topic, partition: self.logs.get(topic, partition) is not None,
            self.replicas.leader_epoch,
        )
        self.scram_credentials = ScramCredentialStore(self.data_dir)
        self._local_follower: LocalFollower | None = None
        #: Connections to the other brokers of a cluster (None on a single node).
        self.peers: PeerConnections | None = None
        #: Sends transaction markers to the partitions' leaders (None on a single node, which leads them all).
        self.marker_channel: MarkerChannel | None = None
        markers: MarkerWriter = LocalMarkerWriter(self.replicas, self.groups)
        if etcd is not None:
            self._follow_cluster(*etcd)
            self.peers = PeerConnections(self.node_id, self._inter_broker_address)
            markers = self.marker_channel = MarkerChannel(self.node_id, self.cluster.partition, markers, self.peers)
        self.transactions = TransactionCoordinator(
            config, self.replicas, self.logs, self.topics, self.producer_ids, markers, clock_ms=now_ms
        )
        # Wired after construction (one of two such links; the other is ``consumer_groups`` below): the transaction
        # coordinator writes the markers the group coordinator listens to, and the group coordinator checks
        # TxnOffsetCommit against its transactions.
        self.groups.transactions = self.transactions
        #: Held by the retention sweep, by each compaction pass and by DeleteRecords' segment deletion, which must
        #: not change a log's segments at once.
        self._housekeeping = trio.Lock()
        self.compactor = LogCompactor(self.logs, self._housekeeping, config.get_int("log.cleaner.backoff.ms"))
        self.group_configs = GroupConfigs(self.data_dir)
        self.consumer_groups = ConsumerGroupCoordinator(
            config, self.metadata, self.group_configs, self.groups, ensure_offsets_topic=self.ensure_offsets_topic
        )
        # KIP-848 groups keep their offsets in the classic coordinator, which asks them about commits.
        self.groups.consumer_groups = self.consumer_groups
        #: Request bytes in flight on every listener (``queued.max.request.bytes``).
        self.request_budget = RequestBudget(config.get_int("queued.max.request.bytes"))
        #: Fetch response bytes not yet sent, across connections: as much again (oncelog's own; Kafka sends fetched
        #: records from the page cache with sendfile, so its unsent responses hold no heap).
        self.response_budget = RequestBudget(config.get_int("queued.max.request.bytes"))
        #: What every connection of every listener uses; handlers are given this node as their ``Broker``.
        self.server_context = ServerContext(
            broker=self,
            config=config,
            request_budget=self.request_budget,
            response_budget=self.response_budget,
            scram_credentials=self.scram_credentials,
            sasl=self.sasl,
            ssl_contexts=self.ssl_contexts,
            is_replica_fetcher=(
                RegisteredFetcherCheck(
                    lambda member=self.member: member.image.broker_leases, self.inter_broker_listener
                )
                if self.member is not None
                else None
            ),
        )
        #: The first listener's bound port once serving.
        self.port: int | None = None

    @staticmethod
    def _etcd(config: BrokerConfig) -> tuple[EtcdClient, Layout]:
        """The client of the etcd named by ``etcd.connect`` and the cluster's keys under its root."""
        try:
            connect = parse_etcd_connect(config.get_str("etcd.connect"))
        except EtcdConnectError as exc:
            raise ConfigError(str(exc)) from exc
        return EtcdClient(connect.endpoints), Layout(connect)

    def _membership(self, config: BrokerConfig, client: EtcdClient, layout: Layout) -> ClusterMember:
        return ClusterMember(
            client,
            layout,
            broker_id=self.node_id,
            session_timeout_ms=config.get_int("broker.session.timeout.ms"),
            controller_options={
                "auto_rebalance": config.get_bool("auto.leader.rebalance.enable"),
                "rebalance_interval_s": config.get_int("leader.imbalance.check.interval.seconds"),
                "imbalance_percentage": config.get_int("leader.imbalance.per.broker.percentage"),
                "unclean_default": config.get_bool("unclean.leader.election.enable"),
            },
            on_fenced=lambda: self.replicas.resign_leadership(now_ms()),
        )

    def _follow_cluster(self, client: EtcdClient, layout: Layout) -> None:
        """Wire topics, the cluster view and producer ids to the cluster's metadata in etcd."""
        member = self.member
        assert member is not None
        self._local_follower = LocalFollower(
            self.node_id, member.follower, self.metadata, self.topics, self.replicas, self.scram_credentials
        )
        self.topics.cluster = EtcdTopicStore(client, layout, self._local_follower)
        self.cluster = ImageView(lambda: member.image, self.listeners[0].name)
        self.producer_ids = ClusterProducerIds(
            lambda: claim_block(client, layout.producer_id_block, broker_id=self.node_id)
        )

    def _inter_broker_endpoint(self, broker_id: int) -> Endpoint | None:
        address = self._inter_broker_address(broker_id)
        return Endpoint(*address, self.inter_broker_listener) if address else None

    async def hand_over(self) -> None:
        """Before stopping on purpose: on a cluster with ``controlled.shutdown.enable``, move this broker's
        leaderships to other in-sync replicas (waiting up to ``CONTROLLED_SHUTDOWN_TIMEOUT_S``), so clients see a
        new leader, not a dead one. Nothing on a single node."""
        if self.member is None or not self.config.get_bool("controlled.shutdown.enable"):
            return
        still_led = await self.member.shut_down(CONTROLLED_SHUTDOWN_TIMEOUT_S)
        log.info("controlled_shutdown", node_id=self.node_id, partitions_still_led=still_led)
        # Keep answering a little longer: a producer's next request gets NOT_LEADER_OR_FOLLOWER naming the new
        # leader (KIP-951) and goes there at once, where a closed connection would send it to a Metadata refresh
        # that backs off (librdkafka: up to retry.backoff.max.ms, 1 s).
        await trio.sleep(HAND_OVER_LINGER_S)

    def _inter_broker_address(self, broker_id: int) -> tuple[str, int] | None:
        """Where other brokers are reached: their registered endpoint on ``inter.broker.listener.name``."""
        if self.member is None:
            return None
        registration = self.member.image.brokers.get(broker_id)
        return registration.endpoints.get(self.inter_broker_listener) if registration else None

    def _registration(self) -> BrokerRegistration:
        """This broker as other brokers and clients find it: its advertised address on every listener."""
        endpoints = {}
        for listener in self.listeners:
            address = self.advertised_for(listener.name)
            endpoints[listener.name] = (address.host, address.port)
        return BrokerRegistration(self.node_id, endpoints, self.config.get_str("broker.rack") or None)

    @property
    def advertised(self) -> Endpoint:
        """The first listener's advertised address."""
        return self.advertised_for(None)

    def advertised_for(self, listener_name: str | None) -> Endpoint:
        """Where clients of the listener named ``listener_name`` (None: the first) are told to connect."""
        listener = next((lst for lst in self.listeners if lst.name == listener_name), self.listeners[0])
        return advertised_address(listener, self._advertised, self.bound_ports.get(listener.name))

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` on first use (FindCoordinator, as Kafka does; also the group requests);
        returns once its logs exist. Raises OSError when it cannot be created (``TopicManager.ensure_internal``)."""
        await self.topics.ensure_internal(
            CONSUMER_OFFSETS_TOPIC,
            self.config.get_int("offsets.topic.num.partitions"),
            INTERNAL_TOPIC_CONFIGS[CONSUMER_OFFSETS_TOPIC],
        )

    def topic_log_config(self, topic: str) -> LogConfig:
        """The storage settings of ``topic``'s logs: broker defaults with the topic's overrides."""
        info = self.metadata.get(topic)
        overrides = info.configs if info is not None else {}
        return self.config.log_config({**overrides, **INTERNAL_TOPIC_CONFIGS.get(topic, {})})

    def alter_dynamic_configs(self, per_broker: bool, configs: Mapping[str, str]) -> None:
        """Make ``configs`` the dynamic set of this broker (``per_broker``) or the cluster default: persisted first
        (OSError: nothing changes), then in effect before this returns: each partition log without an override of
        a changed default gets it, new logs are made with it, the compactor waits the new log.cleaner.backoff.ms."""
        cluster, broker = self.dynamic_configs.cluster, self.dynamic_configs.broker
        if per_broker:
            broker = dict(configs)
        else:
            cluster = dict(configs)
        config = self.dynamic_configs.effective(self.static_config, cluster, broker)
        self.dynamic_configs.store(per_broker, configs)
        self.config = config
        self.logs.default_config = config.log_config()
        self.compactor.backoff_ms = config.get_int("log.cleaner.backoff.ms")
        for (topic, _partition), partition_log in self.logs.all_logs().items():
            log_config = self.topic_log_config(topic)
            if partition_log.config != log_config:
                self.flusher.update_config(partition_log, log_config)
        log.info("dynamic_broker_configs_altered", per_broker=per_broker, configs=configs)

    def _high_watermark_advanced(self, partition_log: PartitionLog) -> None:
        self.replicas.high_watermark_advanced(partition_log)

    def _high_watermark_for(self, partition_log: PartitionLog, safe_end: int) -> int:
        return self.replicas.high_watermark_for(partition_log, safe_end)

    def _log_end_offset(self, topic: str, partition: int) -> int | None:
        partition_log = self.logs.get(topic, partition)
        return None if partition_log is None else partition_log.log_end_offset

    def _topic_id(self, name: str) -> uuid.UUID | None:
        """Topic ``name``'s current id, None when no such topic exists (what the logs on disk are checked against)."""
        topic = self.metadata.get(name)
        return None if topic is None else topic.topic_id

    def _load(self) -> None:
        started = time.monotonic()
        self.metadata.load()
        self.scram_credentials.load()
        self.producer_ids.load()
        segments, partitions = self._segments_to_open()
        problem = fd_budget.startup_problem(segments, partitions)
        if problem is not None:
            raise fd_budget.DescriptorLimitError(problem)
        in_use = fd_budget.open_descriptors() or 0
        try:
            self.logs.load(now_ms(), config_for=self.topic_log_config, topic_id_for=self._topic_id)
            for stray in self.logs.strays_removed:
                log.warning("stray_log_removed", directory=str(stray), reason="recorded another topic id")
            for topic in self.metadata.topics.values():
                self.topics.ensure_logs(topic)
        except (OSError, StorageError) as exc:
            if not _out_of_descriptors(exc):
                raise
            needed = in_use + segments * fd_budget.OPEN_FILES_PER_SEGMENT + fd_budget.RESERVED_FDS
            raise fd_budget.DescriptorLimitError(fd_budget.startup_message(segments, partitions, needed)) from exc
        self.groups.load()
        self.transactions.load()
        log.info(
            "loaded",
            data_dir=str(self.data_dir),
            topics=len(self.metadata.topics),
            partitions=len(self.logs.all_logs()),
            seconds=round(time.monotonic() - started, 3),
        )

    def _segments_to_open(self) -> tuple[int, int]:
        """(segments, partitions) that loading opens: the logs on disk, each with at least its active segment, and
        the partitions of known topics whose logs are missing (a creation cut short), which loading creates."""
        on_disk = self.logs.segments_on_disk()
        missing = sum(
            1
            for topic in self.metadata.topics.values()
            for p in range(topic.partitions)
            if (topic.name, p) not in on_disk
        )
        return sum(max(count, 1) for count in on_disk.values()) + missing, len(on_disk) + missing

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; reports the first listener's bound port once clients can connect to every listener.
        Holds the data dir's lock throughout; raises StartupError when the data dir or a listener cannot be used."""
        lock = DataDirLock(self.data_dir)
        lock.acquire()
        try:
            await trio.to_thread.run_sync(self._load)
        except BaseException:
            lock.release()
            raise
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(self.flusher.run)
                await nursery.start(self.groups.run)
                await nursery.start(self.consumer_groups.run)
                await self.transactions.complete_pending()
                await nursery.start(self.transactions.run_expiration)
                await nursery.start(self.transactions.run_loader)
                nursery.start_soon(self._retention_loop)
                if self.config.get_bool("log.cleaner.enable"):
                    nursery.start_soon(self.compactor.run)
                nursery.start_soon(self._checkpoint_loop)
                if self.replica_fetchers is not None:
                    await nursery.start(self.replica_fetchers.run)
                    nursery.start_soon(self._high_watermark_checkpoint_loop)
                if self.isr_maintenance is not None:
                    await nursery.start(self.isr_maintenance.run)
                # A cluster member binds its listeners before registering (a registered address that refuses
                # connections is a dead broker's) but serves nobody until it has joined: before that it knows
                # neither the cluster's id nor its brokers, and clients would learn a wrong cluster from it
                # (Kafka enables request processing once the broker has caught up and is unfenced).
                accepting = trio.Event()
                for listener in self.listeners:
                    self.bound_ports[listener.name] = await nursery.start(
                        serve, self.server_context, listener, accepting
                    )
                self.port = self.bound_ports[self.listeners[0].name]
                if self.member is not None and self._local_follower is not None and self.peers is not None:
                    await nursery.start(self.peers.run)
                    if self.marker_channel is not None:
                        await nursery.start(self.marker_channel.run)
                    if self._liveness is not None:
                        await nursery.start(self._liveness.run)
                    await nursery.start(self.member.run, self._registration())
                    self.metadata.cluster_id = self.member.cluster_id or self.metadata.cluster_id
                    await nursery.start(self._local_follower.run)
                    assert isinstance(self.producer_ids, ClusterProducerIds)
                    await nursery.start(self.producer_ids.run)
                accepting.set()
                if (
                    self.config.get_bool("delay.service.enable")
                    and (
                        delay := embedded_service(
                            self.config,
                            self.listeners,
                            self.bound_ports,
                            self.replicas if self.member is not None else None,
                        )
                    )
                    is not None
                ):
                    nursery.start_soon(delay.run)
                log.info(
                    "started",
                    node_id=self.node_id,
                    advertised=",".join(
                        f"{lst.name}://{self.advertised_for(lst.name).host}:{self.advertised_for(lst.name).port}"
                        for lst in self.listeners
                    ),
                )
                task_status.started(self.port)
        finally:
            with trio.CancelScope(shield=True):
                if self.replica_fetchers is not None:
                    await trio.to_thread.run_sync(self._checkpoint_high_watermarks)
                await trio.to_thread.run_sync(self.logs.close)
                if self._etcd_client is not None:
                    with trio.move_on_after(ETCD_CLOSE_TIMEOUT_S):
                        await self._etcd_client.aclose()
                lock.release()
                log.info("stopped", node_id=self.node_id)

    async def _retention_loop(self) -> None:
        """Every log.retention.check.interval.ms, a ``_sweep_retention`` (never during a compaction pass)."""
        interval_s = self.config.get_int("log.retention.check.interval.ms") / 1000
        while True:
            await trio.sleep(interval_s)
            async with self._housekeeping:
                self._sweep_retention()

    def _sweep_retention(self) -> None:
        """Roll idle segments by age, expire producers and delete old segments, in every log."""
        now = now_ms()
        for partition_log in list(self.logs.all_logs().values()):
            try:
                partition_log.maybe_roll_for_time(now)
                partition_log.producer_state.expire_producers(now)
                deleted = partition_log.enforce_retention(now)
            except (OSError, StorageError) as exc:
                _housekeeping_failed(partition_log, exc)
                continue
            if deleted:
                log.info("retention", topic=partition_log.topic, partition=partition_log.partition, segments=deleted)
                self.replicas.log_start_moved(partition_log.topic, partition_log.partition)

    async def delete_segments_below_start(self, partition_logs: Iterable[PartitionLog], timeout_s: float) -> None:
        """Delete the segments wholly below each log's start offset (after DeleteRecords) now, or, if a compaction
        pass holds the housekeeping lock for longer than ``timeout_s``, leave them to the next retention sweep.
        Logs deleted meanwhile are skipped; a failure is logged, as the sweep's."""
        try:
            self._housekeeping.acquire_nowait()
        except trio.WouldBlock:
            with trio.move_on_after(max(timeout_s, 0.0)) as waited:
                await self._housekeeping.acquire()
            if waited.cancelled_caught:
                log.info("segment_deletion_deferred", reason="a compaction pass holds the housekeeping lock")
                return
        try:
            for partition_log in partition_logs:
                if self.logs.get(partition_log.topic, partition_log.partition) is not partition_log:
                    continue
                try:
                    partition_log.delete_segments_below_start()
                except (OSError, StorageError) as exc:
                    _housekeeping_failed(partition_log, exc)
        finally:
            self._housekeeping.release()

    async def _high_watermark_checkpoint_loop(self) -> None:
        """A cluster member saves its high watermarks every replica.high.watermark.checkpoint.interval.ms (and at
        shutdown): a restarted replica starts from them rather than from its log end."""
        interval_s = self.config.get_int("replica.high.watermark.checkpoint.interval.ms") / 1000
        while True:
            await trio.sleep(interval_s)
            await trio.to_thread.run_sync(self._checkpoint_high_watermarks)

    def _checkpoint_high_watermarks(self) -> None:
        try:
            self.logs.checkpoint_high_watermarks()
        except (OSError, StorageError) as exc:
            log.error("high_watermark_checkpoint_failed", error=str(exc))

    async def _checkpoint_loop(self) -> None:
        """Every log.flush.offset.checkpoint.interval.ms: fsync everything (indexes too) and save recovery points,
        bounding how much a restart after a crash must revalidate."""
        interval_s = self.config.get_int("log.flush.offset.checkpoint.interval.ms") / 1000
        while True:
            await trio.sleep(interval_s)
            failures = await trio.to_thread.run_sync(self.logs.flush_and_checkpoint)
            for failure in failures:
                log.error("checkpoint_failed", error=str(failure))


def _out_of_descriptors(exc: BaseException | None) -> bool:
    """``exc`` is, or was caused by, EMFILE / ENFILE."""
    while exc is not None:
        if isinstance(exc, OSError) and exc.errno in (errno.EMFILE, errno.ENFILE):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _housekeeping_failed(partition_log: PartitionLog, exc: Exception) -> None:
    # A full or failing disk must not stop the broker: the next round tries again.
    log.error("housekeeping_failed", topic=partition_log.topic, partition=partition_log.partition, error=str(exc))
