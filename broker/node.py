"""A single broker node: owns the data dir, the partition logs and every background task, and serves clients.

Lifetime: ``run`` loads state (recovering logs after an unclean stop), starts the flusher, retention and checkpoint
tasks and the listener in one nursery; cancelling ``run`` (SIGTERM/SIGINT in the CLI) leaves that nursery and then
closes the logs cleanly (flush, producer snapshots, checkpoints, clean-shutdown marker).
"""

from __future__ import annotations

import errno
import ssl
import time
from collections.abc import Iterable
from pathlib import Path

import structlog
import trio
from oncelog.broker import fd_budget
from oncelog.broker.clock import now_ms
from oncelog.broker.config import BrokerConfig
from oncelog.broker.delay.embedded import embedded_service
from oncelog.broker.flusher import LogFlusher
from oncelog.broker.group.coordinator import GroupCoordinator
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
from oncelog.broker.request_budget import RequestBudget
from oncelog.broker.sasl.config import SaslListenerConfig, sasl_listener_config
from oncelog.broker.sasl.credentials import ScramCredentialStore
from oncelog.broker.server import serve
from oncelog.broker.startup import DataDirLock
from oncelog.broker.tls import server_context
from oncelog.broker.topics import TopicManager
from oncelog.broker.txn.coordinator import TransactionCoordinator
from oncelog.broker.txn.markers import LocalMarkerWriter
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import StorageError
from oncelog.storage.log import PartitionLog
from oncelog.storage.log_manager import LogManager

log = structlog.get_logger(__name__)


class BrokerNode:
    """Composition root of the broker; handlers reach every component through it."""

    def __init__(self, config: BrokerConfig, listen: Endpoint | None = None, advertise: Endpoint | None = None) -> None:
        """Listeners come from ``listeners`` / ``advertised.listeners`` / ``listener.security.protocol.map``;
        ``listen`` / ``advertise`` (the old single-listener form) replace them with one PLAINTEXT listener.
        Raises ConfigError for listeners or SASL settings Kafka would refuse or this broker cannot serve."""
        self.config = config
        self.node_id = config.get_int("node.id")
        self.data_dir = Path(config.get_str("log.dirs"))
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
        )
        self.replicas = ReplicaManager(self.logs, self.flusher)
        self.producer_ids = ProducerIdAllocator(self.data_dir / "producer-id-block")
        self.topics = TopicManager(self)
        self.transactions = TransactionCoordinator(self, LocalMarkerWriter(self.replicas))
        self.groups = GroupCoordinator(self)
        #: Held by the retention sweep, by each compaction pass and by DeleteRecords' segment deletion, which must
        #: not change a log's segments at once.
        self._housekeeping = trio.Lock()
        self.compactor = LogCompactor(self.logs, self._housekeeping, config.get_int("log.cleaner.backoff.ms"))
        self.scram_credentials = ScramCredentialStore(self.data_dir)
        #: Request bytes in flight on every listener (``queued.max.request.bytes``).
        self.request_budget = RequestBudget(config.get_int("queued.max.request.bytes"))
        #: Fetch response bytes not yet sent, across connections: as much again (oncelog's own; Kafka sends fetched
        #: records from the page cache with sendfile, so its unsent responses hold no heap).
        self.response_budget = RequestBudget(config.get_int("queued.max.request.bytes"))
        #: The first listener's bound port once serving.
        self.port: int | None = None

    @property
    def advertised(self) -> Endpoint:
        """The first listener's advertised address."""
        return self.advertised_for(None)

    def advertised_for(self, listener_name: str | None) -> Endpoint:
        """Where clients of the listener named ``listener_name`` (None: the first) are told to connect."""
        listener = next((lst for lst in self.listeners if lst.name == listener_name), self.listeners[0])
        return advertised_address(listener, self._advertised, self.bound_ports.get(listener.name))

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` on first use (group lookups, AddOffsetsToTxn), as Kafka does; returns once
        its logs exist."""
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

    def _high_watermark_advanced(self, partition_log) -> None:
        self.replicas.high_watermark_advanced(partition_log)

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
            self.logs.load(now_ms(), config_for=self.topic_log_config)
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
                await self.transactions.complete_pending()
                await nursery.start(self.transactions.run_expiration)
                nursery.start_soon(self._retention_loop)
                if self.config.get_bool("log.cleaner.enable"):
                    nursery.start_soon(self.compactor.run)
                nursery.start_soon(self._checkpoint_loop)
                for listener in self.listeners:
                    self.bound_ports[listener.name] = await nursery.start(serve, self, listener)
                self.port = self.bound_ports[self.listeners[0].name]
                if self.config.get_bool("delay.service.enable") and (delay := embedded_service(self)) is not None:
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
                await trio.to_thread.run_sync(self.logs.close)
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
