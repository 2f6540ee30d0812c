"""Creating, growing, reconfiguring and deleting topics: Kafka's validation rules; metadata persisted first, then the
partition logs. A deletion removes the groups' committed offsets of the topic before the topic itself.

New partition logs are created in a worker thread (``log_builder``), so the event loop keeps serving meanwhile; the
request that creates them is answered once they exist. The metadata is the point where concurrent requests are
ordered: validation and the durable metadata write happen with no await between them, so of two creations of one
name (CreateTopics, a Metadata auto-creation, an internal topic's first use) exactly one writes it and the other gets
TOPIC_ALREADY_EXISTS (or sees the topic). While a topic's logs are being created, CreatePartitions, a deletion and
``ensure_internal`` of that topic wait for them (``_settled``); Metadata answers LEADER_NOT_AVAILABLE for each
partition without a log yet (``apis/metadata``), and Produce/Fetch to it get UNKNOWN_TOPIC_OR_PARTITION. A crash
mid-way leaves the topic in ``topics.json`` with some logs missing; the next start creates them (``ensure_logs``)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import structlog
import trio
from oncelog.broker.config import validate_topic_configs
from oncelog.broker.controller.refused import Refused
from oncelog.broker.etcd.client import EtcdError
from oncelog.broker.faults import fault_point
from oncelog.broker.fd_budget import (
    FDS_PER_NEW_PARTITION,
    SEGMENTS_PER_NEW_PARTITION,
    descriptor_limits,
    limit_advice,
    partitions_affordable,
)
from oncelog.broker.log_builder import build_logs
from oncelog.broker.metadata import (
    INTERNAL_TOPICS,
    NON_POSITIVE_PARTITIONS,
    NON_POSITIVE_REPLICATION_FACTOR,
    TopicInfo,
    topic_name_problem,
)
from oncelog.broker.topic_configs import ConfigChangeError, ConfigOp, new_overrides
from oncelog.protocol import ErrorCode
from oncelog.storage.errors import StorageError
from oncelog.storage.segment import OPEN_FILES_PER_SEGMENT

if TYPE_CHECKING:
    from oncelog.broker.cluster.topic_store import EtcdTopicStore
    from oncelog.broker.config import BrokerConfig
    from oncelog.broker.flusher import LogFlusher
    from oncelog.broker.metadata import MetadataStore
    from oncelog.broker.replica_manager import ReplicaManager
    from oncelog.storage.config import LogConfig
    from oncelog.storage.log_manager import LogManager

log = structlog.get_logger(__name__)

#: Kafka's CreateTopics sentinel for "use the broker default" (KIP-464).
USE_BROKER_DEFAULT = -1
#: The property giving each internal topic's replication factor on a cluster (a single node has one replica).
#: The delay topics (``broker/delay/topics.py``), internal too, are replicated like the offsets they commit to.
DELAY_REPLICATION_FACTOR = "offsets.topic.replication.factor"
INTERNAL_REPLICATION_FACTORS = {
    "__consumer_offsets": "offsets.topic.replication.factor",
    "__transaction_state": "transaction.state.log.replication.factor",
}


class GroupOffsets(Protocol):
    """The committed offsets a topic's deletion removes first (the group coordinator's)."""

    async def delete_partition_offsets(self, deleted: Callable[[str, int], bool]) -> ErrorCode:
        """Remove every group's committed and pending transactional offsets of the partitions ``deleted`` names,
        durably; an error when they could not all be removed."""
        ...


@dataclass(frozen=True)
class TopicOutcome:
    error: ErrorCode
    message: str | None = None
    topic: TopicInfo | None = None


class TopicManager:
    """Validates and applies topic creation, deletion and config changes for this node."""

    def __init__(
        self,
        config: BrokerConfig,
        metadata: MetadataStore,
        logs: LogManager,
        replicas: ReplicaManager,
        flusher: LogFlusher,
        *,
        log_config_for: Callable[[str], LogConfig],
        group_offsets: GroupOffsets,
        deleting: set[str],
    ) -> None:
        """``config``: the broker's settings read here (none of them dynamic); ``log_config_for(topic)``: the storage
        settings of a topic's logs as they are now (dynamic broker defaults included); ``group_offsets``: whose
        committed offsets a deletion removes first; ``deleting``: the set this manager keeps of the topics being
        deleted, shared with the group coordinator, which refuses offset commits of them."""
        self._config = config
        self._node_id = config.get_int("node.id")
        self._metadata = metadata
        self._logs = logs
        self._replicas = replicas
        self._flusher = flusher
        self._log_config_for = log_config_for
        self._group_offsets = group_offsets
        #: Topics whose deletion is under way: they still exist, but offsets of them are no longer committed.
        self.deleting = deleting
        #: Deletions run one at a time, as Kafka's controller applies them.
        self._deletion_lock = trio.Lock()
        #: Topics whose new partition logs are being created, each with the event set once they are.
        self._building: dict[str, trio.Event] = {}
        #: How many partition logs those creations are making, counted against the file-descriptor budget.
        self._pending_partitions = 0
        #: On a cluster (``etcd.connect``): where topic changes are made; they reach this node through ``mirror``
        #: and ``remove_local``. None on a single node, whose ``MetadataStore`` is the topics' only home.
        self.cluster: EtcdTopicStore | None = None

    def ensure_logs(self, topic: TopicInfo) -> None:
        """Open or create every partition log of ``topic`` in the calling thread: for the start, before serving
        (it creates the logs a crash in the middle of a creation left missing). Serving code uses ``_build_logs``."""
        logs = self._logs
        log_config = self._log_config_for(topic.name)
        for partition in range(topic.partitions):
            if logs.get(topic.name, partition) is None:
                logs.create(topic.name, partition, log_config, topic.topic_id)

    def validate(
        self, name: str, num_partitions: int, replication_factor: int, configs: Mapping[str, str | None]
    ) -> TopicOutcome | None:
        """The error a CreateTopics request for this topic gets, or None when it may be created."""
        problem = topic_name_problem(name)
        if problem is not None:
            return TopicOutcome(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        if name in INTERNAL_TOPICS:
            return TopicOutcome(ErrorCode.INVALID_REQUEST, f"Creation of internal topic {name} is prohibited.")
        metadata = self._metadata
        if metadata.get(name) is not None:
            return TopicOutcome(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        colliding = metadata.colliding_topic(name)
        if colliding is not None:
            return TopicOutcome(
                ErrorCode.INVALID_TOPIC_EXCEPTION, f"Topic '{name}' collides with existing topic: {colliding}"
            )
        if num_partitions != USE_BROKER_DEFAULT and num_partitions < 1:
            return TopicOutcome(ErrorCode.INVALID_PARTITIONS, NON_POSITIVE_PARTITIONS)
        if num_partitions == USE_BROKER_DEFAULT:
            num_partitions = self._config.get_int("num.partitions")
        over_budget = self._descriptor_problem(num_partitions)
        if over_budget is not None:
            return over_budget
        if self.cluster is None and replication_factor not in (USE_BROKER_DEFAULT, 1):
            message = (
                NON_POSITIVE_REPLICATION_FACTOR
                if replication_factor < 1
                else f"Unable to replicate the partition {replication_factor} time(s): "
                f"The target replication factor of {replication_factor} cannot be reached because only 1 broker(s) "
                "are registered."
            )
            return TopicOutcome(ErrorCode.INVALID_REPLICATION_FACTOR, message)
        config_problem = validate_topic_configs(configs)
        if config_problem is not None:
            return TopicOutcome(ErrorCode.INVALID_CONFIG, config_problem)
        return None

    def _descriptor_problem(self, new_partitions: int) -> TopicOutcome | None:
        """INVALID_PARTITIONS when the process lacks the file descriptors for ``new_partitions`` more logs (see
        ``fd_budget``; creations under way count as done)."""
        affordable = partitions_affordable(self._pending_partitions)
        if new_partitions <= affordable:
            return None
        soft, _hard = descriptor_limits()
        needed = soft + (new_partitions - affordable) * FDS_PER_NEW_PARTITION
        return TopicOutcome(
            ErrorCode.INVALID_PARTITIONS,
            f"Creating {new_partitions} partition(s) needs {new_partitions * FDS_PER_NEW_PARTITION} file descriptors "
            f"({FDS_PER_NEW_PARTITION} each: {SEGMENTS_PER_NEW_PARTITION} segments of {OPEN_FILES_PER_SEGMENT} open "
            f"files, its first and the one its first roll opens); this broker has enough for {affordable} more "
            f"partition(s). {limit_advice(needed)}.",
        )

    async def _settled(self, name: str) -> None:
        """Return once no creation of ``name``'s partition logs is under way (at once when none is)."""
        while (done := self._building.get(name)) is not None:
            await done.wait()

    async def _build_logs(self, topic: TopicInfo, first_partition: int) -> OSError | StorageError | None:
        """Create the missing logs of ``topic``'s partitions from ``first_partition`` on, off the event loop; returns
        once they exist (registered), or with the storage failure that stopped the creation (the logs made before it
        exist, the others are made at the next start). Callers write the metadata first and call this with no await
        in between, so ``_settled`` covers the whole time the topic's metadata is ahead of its logs."""
        logs = self._logs
        partitions = [p for p in range(first_partition, topic.partitions) if logs.get(topic.name, p) is None]
        return await self._build_partitions(topic, partitions)

    async def _build_partitions(self, topic: TopicInfo, partitions: list[int]) -> OSError | StorageError | None:
        """``_build_logs`` of the listed partitions (none of which has a log)."""
        name = topic.name
        assert name not in self._building, f"two creations of {name}'s logs at once"
        done = self._building[name] = trio.Event()
        logs = self._logs
        self._pending_partitions += len(partitions)
        try:
            config = self._log_config_for(name)
            built, failure = await build_logs(logs, name, partitions, config, topic_id=topic.topic_id)
            current = self._log_config_for(name)
            if current != config:  # the topic's configs were altered meanwhile, for its registered logs only
                for partition_log in built:
                    self._flusher.update_config(partition_log, current)
        finally:
            self._pending_partitions -= len(partitions)
            del self._building[name]
            done.set()
        if failure is not None:
            log.error("logs_not_created", topic=name, created=len(built), of=len(partitions), error=str(failure))
        return failure

    async def create(
        self,
        name: str,
        num_partitions: int = USE_BROKER_DEFAULT,
        replication_factor: int = USE_BROKER_DEFAULT,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicOutcome:
        """Create a topic: metadata persisted, then its logs created off the event loop; returns once they exist
        (KAFKA_STORAGE_ERROR if some could not be created: the topic stands, those partitions come at the next
        start). Returns the error code to report."""
        configs = dict(configs or {})
        failure = self.validate(name, num_partitions, replication_factor, configs)
        if failure is not None:
            return failure
        if num_partitions == USE_BROKER_DEFAULT:
            num_partitions = self._config.get_int("num.partitions")
        if validate_only:
            return TopicOutcome(ErrorCode.NONE)
        if self.cluster is not None:
            if replication_factor == USE_BROKER_DEFAULT:
                replication_factor = self._config.get_int("default.replication.factor")
            overrides = {k: v for k, v in configs.items() if v is not None}
            creation = self.cluster.create(name, num_partitions, replication_factor, overrides)
            return await self._in_cluster(name, creation)
        try:
            topic = self._metadata.add(name, num_partitions, {k: v for k, v in configs.items() if v is not None})
        except OSError as exc:
            log.error("topic_not_saved", topic=name, error=str(exc))
            return TopicOutcome(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot save topic {name}: {exc}")
        failure = await self._build_logs(topic, 0)
        if failure is not None:
            return TopicOutcome(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot create the logs of topic {name}: {failure}")
        log.info("topic_created", topic=name, partitions=num_partitions, configs=topic.configs)
        return TopicOutcome(ErrorCode.NONE, topic=topic)

    async def create_partitions(
        self,
        name: str,
        count: int,
        assignments: Sequence[Sequence[int]] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicOutcome:
        """Grow ``name`` to ``count`` partitions (CreatePartitions); the new count is persisted before the new
        partitions' logs exist, so after a restart they exist too; it returns once they exist (created off the event
        loop, after any creation of the topic's logs under way). ``assignments`` lists the replicas of each new
        partition, or is None for the broker's choice."""
        await self._settled(name)
        failure = self.growth_problem(name, count, assignments)
        if failure is not None:
            return failure
        if validate_only:
            return TopicOutcome(ErrorCode.NONE)
        if self.cluster is not None:
            return await self._in_cluster(name, self.cluster.add_partitions(name, count))
        first_new = self._metadata.topics[name].partitions
        try:
            topic = self._metadata.grow(name, count)
        except OSError as exc:
            log.error("partitions_not_saved", topic=name, error=str(exc))
            return TopicOutcome(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot save topic {name}: {exc}")
        failure = await self._build_logs(topic, first_new)
        if failure is not None:
            return TopicOutcome(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot create the new logs of {name}: {failure}")
        log.info("partitions_created", topic=name, partitions=count)
        return TopicOutcome(ErrorCode.NONE, topic=topic)

    def growth_problem(self, name: str, count: int, assignments: Sequence[Sequence[int]] | None) -> TopicOutcome | None:
        """The error a CreatePartitions request for this topic gets (Kafka's controller checks, in its order),
        or None when the topic may grow to ``count`` partitions."""
        topic = self._metadata.get(name)
        if topic is None:
            return TopicOutcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        if topic.is_internal:
            # Kafka would grow them; the coordinators here map ids to their partitions by a fixed count.
            return TopicOutcome(ErrorCode.INVALID_REQUEST, f"Adding partitions to internal topic {name} is prohibited.")
        if count == topic.partitions:
            return TopicOutcome(ErrorCode.INVALID_PARTITIONS, f"Topic already has {topic.partitions} partition(s).")
        if count < topic.partitions:
            return TopicOutcome(
                ErrorCode.INVALID_PARTITIONS,
                f"The topic {name} currently has {topic.partitions} partition(s); {count} would not be an increase.",
            )
        over_budget = self._descriptor_problem(count - topic.partitions)
        if over_budget is not None:
            return over_budget
        if assignments is None:
            return None
        added = count - topic.partitions
        if len(assignments) != added:
            return TopicOutcome(
                ErrorCode.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {added} additional partition(s), but only {len(assignments)} assignment(s) "
                "were specified.",
            )
        for replicas in assignments:
            problem = self._manual_assignment_problem(replicas)
            if problem is not None:
                return TopicOutcome(ErrorCode.INVALID_REPLICA_ASSIGNMENT, problem)
        return None

    def _manual_assignment_problem(self, replicas: Sequence[int]) -> str | None:
        """Kafka's checks of one new partition's replicas, with this node as the only registered broker."""
        if not replicas:
            return "The manual partition assignment includes an empty replica list."
        previous = None
        for broker_id in sorted(replicas):
            if broker_id != self._node_id:
                return f"The manual partition assignment includes broker {broker_id}, but no such broker is registered."
            if broker_id == previous:
                return f"The manual partition assignment includes the broker {broker_id} more than once."
            previous = broker_id
        return None

    async def ensure_internal(self, name: str, partitions: int, configs: Mapping[str, str]) -> TopicInfo:
        """Create an internal topic (``__transaction_state``, ``__consumer_offsets``) unless it exists; returns once
        its logs exist, also when another request's creation of it is under way. Raises OSError when it cannot be
        created (``create_internal``'s refusal); logs that cannot be created are logged (appends to them fail) and
        made at the next start."""
        outcome = await self.create_internal(name, partitions, configs)
        if outcome.topic is None:
            raise OSError(f"{name} could not be created: {outcome.error.name} {outcome.message}")
        return outcome.topic

    async def create_internal(self, name: str, partitions: int, configs: Mapping[str, str]) -> TopicOutcome:
        """``ensure_internal``, answering instead of raising: the topic, or why it does not exist here (Kafka's
        code): on a cluster the refusal (INVALID_REPLICATION_FACTOR while fewer brokers are live than its
        replication factor), TOPIC_ALREADY_EXISTS while another broker's creation has not reached this one,
        REQUEST_TIMED_OUT when etcd could not be reached, LEADER_NOT_AVAILABLE when it was created but is gone
        again; on a single node KAFKA_STORAGE_ERROR when its metadata
        cannot be written."""
        await self._settled(name)
        topic = self._metadata.get(name)
        if topic is None and self.cluster is not None:
            factor = self._config.get_int(INTERNAL_REPLICATION_FACTORS.get(name, DELAY_REPLICATION_FACTOR))
            outcome = await self._in_cluster(name, self.cluster.create(name, partitions, factor, configs))
            topic = self._metadata.get(name)
            if topic is None:
                error = outcome.error if outcome.error != ErrorCode.NONE else ErrorCode.LEADER_NOT_AVAILABLE
                return TopicOutcome(error, outcome.message)
        if topic is None:
            try:
                topic = self._metadata.add(name, partitions, configs)
            except OSError as exc:
                log.error("topic_not_saved", topic=name, error=str(exc))
                return TopicOutcome(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot save topic {name}: {exc}")
            if await self._build_logs(topic, 0) is None:
                log.info("internal_topic_created", topic=name, partitions=partitions)
        return TopicOutcome(ErrorCode.NONE, topic=topic)

    async def alter_configs(
        self, name: str, ops: Sequence[ConfigOp], *, incremental: bool, validate_only: bool = False
    ) -> TopicOutcome:
        """IncrementalAlterConfigs (``incremental``) or AlterConfigs (``ops`` are SETs replacing every override) of
        topic ``name``. Unless ``validate_only``, a valid change is persisted (topics.json, atomic and fsynced; on a
        cluster, the topic's record in etcd) and then applied to every partition log of the topic before this
        returns; a failed write changes nothing (KAFKA_STORAGE_ERROR). Checks and errors are Kafka's, the topic's
        existence before its configs."""
        if not name:
            return TopicOutcome(ErrorCode.INVALID_REQUEST, "Default topic resources are not allowed.")
        problem = topic_name_problem(name)
        if problem is not None:
            return TopicOutcome(ErrorCode.INVALID_TOPIC_EXCEPTION, problem)
        topic = self._metadata.get(name)
        if topic is None:
            return TopicOutcome(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        try:
            configs = new_overrides(name, topic.configs, ops, incremental=incremental)
        except ConfigChangeError as exc:
            return TopicOutcome(exc.code, exc.message)
        if validate_only or configs == topic.configs:
            return TopicOutcome(ErrorCode.NONE, topic=topic)
        if self.cluster is not None:  # stored in etcd; every broker applies it through ``mirror``
            return await self._in_cluster(name, self.cluster.set_configs(name, configs))
        try:
            self._metadata.set_configs(name, configs)
        except OSError as exc:
            log.error("topic_configs_not_saved", topic=name, error=str(exc))
            return TopicOutcome(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot save the configs of topic {name}: {exc}")
        log_config = self._log_config_for(name)
        for partition in range(topic.partitions):
            partition_log = self._logs.get(name, partition)
            if partition_log is not None:
                self._flusher.update_config(partition_log, log_config)
        log.info("topic_configs_altered", topic=name, configs=configs)
        return TopicOutcome(ErrorCode.NONE, topic=topic)

    async def delete(self, name: str) -> TopicOutcome:
        """Delete a topic: first every group's committed and pending transactional offsets of it (tombstones in
        ``__consumer_offsets``, durable; OffsetCommit / TxnOffsetCommit of the topic are refused from the start),
        then the topic (metadata persisted) and its logs. So a crash at any point cannot leave offsets of a deleted
        topic for a topic re-created under its name: either the topic still exists (with fewer offsets, and the
        deletion can be retried) or both are gone. If the offsets cannot be removed, the topic stays."""
        async with self._deletion_lock:
            if not self._config.get_bool("delete.topic.enable"):
                return TopicOutcome(ErrorCode.TOPIC_DELETION_DISABLED, "Topic deletion is disabled.")
            topic = self._metadata.get(name)
            if topic is None:
                return TopicOutcome(
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition."
                )
            if topic.is_internal:
                return TopicOutcome(ErrorCode.INVALID_REQUEST, f"Deletion of internal topic {name} is prohibited.")
            self.deleting.add(name)
            try:
                error = await self._group_offsets.delete_partition_offsets(lambda t, _: t == name)
                if error != ErrorCode.NONE:
                    return TopicOutcome(
                        ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot delete the committed offsets of {name}: {error.name}"
                    )
                fault_point("topic.after_offsets_deleted")
                await self._settled(name)  # a creation of its logs (CreateTopics, CreatePartitions) ends first
                if self.cluster is not None:
                    return await self._in_cluster(name, self.cluster.delete(name))
                return self._remove(name)
            finally:
                self.deleting.discard(name)

    async def _in_cluster(self, name: str, change: Awaitable[object]) -> TopicOutcome:
        """The outcome of a topic change made in etcd: this node's copy of the topic once it arrived here, or the
        refusal (Kafka's code) or REQUEST_TIMED_OUT when etcd cannot be reached or the change did not arrive."""
        try:
            await change
        except Refused as refused:
            return TopicOutcome(refused.error, str(refused))
        except EtcdError as exc:
            log.warning("topic_change_failed", topic=name, error=str(exc))
            return TopicOutcome(ErrorCode.REQUEST_TIMED_OUT, f"The cluster's metadata could not be changed: {exc}")
        return TopicOutcome(ErrorCode.NONE, topic=self._metadata.get(name))

    async def mirror(self, topic: TopicInfo, local_partitions: Sequence[int]) -> None:
        """Make this node's copy of a cluster topic match ``topic`` (the same id; added, grown or reconfigured) and
        create the logs of ``local_partitions``, the partitions this node holds a replica of."""
        metadata = self._metadata
        current = metadata.get(topic.name)
        if current is None:
            metadata.add(topic.name, topic.partitions, topic.configs, topic_id=topic.topic_id)
        else:
            if topic.partitions > current.partitions:
                metadata.grow(topic.name, topic.partitions)
            if topic.configs != current.configs:
                metadata.set_configs(topic.name, topic.configs)
                log_config = self._log_config_for(topic.name)
                for partition in range(topic.partitions):
                    partition_log = self._logs.get(topic.name, partition)
                    if partition_log is not None:
                        self._flusher.update_config(partition_log, log_config)
        missing = [p for p in local_partitions if self._logs.get(topic.name, p) is None]
        if missing:
            await self._settled(topic.name)
            await self._build_partitions(metadata.topics[topic.name], missing)

    async def remove_local(self, name: str) -> None:
        """Remove this node's copy of a topic the cluster deleted (or replaced under a new id), with its logs and
        the committed offsets of it that this node's group coordinator holds."""
        await self._settled(name)
        error = await self._group_offsets.delete_partition_offsets(lambda t, _: t == name)
        if error != ErrorCode.NONE:
            log.error("offsets_of_deleted_topic_kept", topic=name, error=error.name)
        self._remove(name)

    def _remove(self, name: str) -> TopicOutcome:
        """Remove topic ``name`` (persisted) and delete its logs."""
        topic = self._metadata.get(name)
        assert topic is not None  # deletions are serialized and nothing else removes topics
        try:
            self._metadata.remove(name)
        except OSError as exc:
            log.error("topic_not_removed", topic=name, error=str(exc))
            return TopicOutcome(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot remove topic {name}: {exc}")
        for partition in range(topic.partitions):
            partition_log = self._logs.get(name, partition)
            if partition_log is not None:
                self._flusher.forget(partition_log)
            self._replicas.forget(name, partition)
        self._logs.delete_topic(name)
        log.info("topic_deleted", topic=name)
        return TopicOutcome(ErrorCode.NONE)
