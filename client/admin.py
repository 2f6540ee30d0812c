"""The async admin client: topics, records, configs, log dirs, groups, and KIP-664 transaction tooling."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oncelog.client.assignors import decode_assignment
from oncelog.client.cluster import COORDINATOR_GROUP, COORDINATOR_TRANSACTION, Cluster
from oncelog.client.errors import KafkaError, error_for
from oncelog.client.security import connection_security
from oncelog.client.txn_manager import coordinator_request
from oncelog.client.types import BrokerNode, ClusterDescription, PartitionReplicas, TopicPartition
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.messages.delete_records import HIGH_WATERMARK as HIGH_WATERMARK  # delete_records' "all"

RESOURCE_TYPES = {"topic": 2, "broker": 4}  # DescribeConfigs resource_type (Kafka ConfigResource.Type)
#: IncrementalAlterConfigs operations (Kafka's AlterConfigOp.OpType); append/subtract only on list configs.
CONFIG_OPS = {"set": 0, "delete": 1, "append": 2, "subtract": 3}
#: CreateTopics' partition count or replication factor that means the broker's num.partitions /
#: default.replication.factor (KIP-464, CreateTopics v4+).
USE_BROKER_DEFAULT = -1
ADMIN_TIMEOUT_MS = 30000  # default.api.timeout.ms is 60000; admin requests carry 30 s like Kafka's tools
#: How long end_transaction retries a coordinator that is moving, loading or busy (max.block.ms, Kafka's 60000).
MAX_BLOCK_MS = 60000
#: Pause between those retries (retry.backoff.ms, Kafka's default 100).
RETRY_BACKOFF_MS = 100
#: Coordinator states in which a transaction still owns its partitions: the coordinator will end it by itself
#: (Ongoing until EndTxn or timeout; the Prepare* states until its markers are written). PrepareEpochFence is the
#: step before PrepareAbort when a timed-out transaction is fenced.
OPEN_TXN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})


@dataclass(frozen=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str


@dataclass(frozen=True)
class TransactionDescription:
    transactional_id: str
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int
    partitions: list[TopicPartition] = field(default_factory=list)


@dataclass(frozen=True)
class GroupListing:
    group_id: str
    protocol_type: str
    state: str


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    client_id: str
    client_host: str
    assignment: list[TopicPartition]


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: list[MemberDescription]


@dataclass(frozen=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    current_txn_start_offset: int


@dataclass(frozen=True)
class HangingTransaction:
    """An open transaction on a partition that its coordinator does not consider open there (it holds the
    partition's last stable offset back until ``oncelog txn abort`` writes an ABORT marker)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    current_txn_start_offset: int
    last_timestamp: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class LogDirDescription:
    """One log directory of one broker (DescribeLogDirs): its path and the bytes of each partition it holds."""

    broker_id: int
    path: str
    partition_sizes: dict[TopicPartition, int]
    total_bytes: int = -1  # the volume's size; -1 when the broker does not say (DescribeLogDirs < v4)
    usable_bytes: int = -1


def raise_partition_errors(api: str, errors: Mapping[TopicPartition, int]) -> None:
    """Raise the client error of the first non-zero code in ``errors``, its message naming every failed partition
    with its code; return when there is none."""
    failed = {tp: code for tp, code in sorted(errors.items()) if code}
    if failed:
        detail = ", ".join(f"{tp.topic}-{tp.partition} {ErrorCode(code).name}" for tp, code in failed.items())
        raise error_for(next(iter(failed.values())), f"{api} {detail}")


def coordinator_has_open(descriptions: Iterable[TransactionDescription], producer_id: int, tp: TopicPartition) -> bool:
    """Whether one of the coordinator's ``descriptions`` is ``producer_id``'s transaction, still open
    (``OPEN_TXN_STATES``) and holding ``tp``; a partition's open transaction for which this is False hangs."""
    return any(d.producer_id == producer_id and d.state in OPEN_TXN_STATES and tp in d.partitions for d in descriptions)


class Admin:
    """``async with Admin("host:port") as admin: await admin.create_topic("t", 3)``."""

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        *,
        request_timeout_ms: int = 30000,
        client_id: str = "oncelog-admin",
        **security: Any,
    ) -> None:
        """``security``: security_protocol with the ssl_* and sasl_* settings of ``client.security``."""
        self._cluster = Cluster(
            bootstrap_servers,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            security=connection_security(**security),
        )

    async def __aenter__(self) -> Admin:
        await self._cluster.__aenter__()
        try:
            await self._cluster.any_connection()
        except BaseException:
            await self._cluster.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._cluster.__aexit__(None, None, None)

    async def _controller(self) -> int | None:
        await self._cluster.refresh_metadata([])
        return self._cluster.controller_id if self._cluster.controller_id >= 0 else None

    # --- topics -------------------------------------------------------------------------------------------

    async def create_topics(
        self,
        topics: Mapping[str, int],
        *,
        replication_factor: int = 1,
        configs: Mapping[str, str] | None = None,
        validate_only: bool = False,
        timeout_ms: int = ADMIN_TIMEOUT_MS,
    ) -> dict[str, KafkaError | None]:
        """Create ``{name: partitions}``; returns each topic's error (None when created). A count or replication
        factor of USE_BROKER_DEFAULT takes the broker's default."""
        body = {
            "topics": [
                {
                    "name": name,
                    "num_partitions": n,
                    "replication_factor": replication_factor,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
                for name, n in topics.items()
            ],
            "timeout_ms": timeout_ms,
            "validate_only": validate_only,
        }
        resp = await self._cluster.request(await self._controller(), ApiKey.CREATE_TOPICS, body)
        self._cluster.invalidate()
        return {t.name: error_for(t.error_code, t.error_message) if t.error_code else None for t in resp.topics}

    async def create_topic(self, name: str, partitions: int = 1, **kw: Any) -> None:
        """Create one topic; raises its error (TOPIC_ALREADY_EXISTS included)."""
        error = (await self.create_topics({name: partitions}, **kw))[name]
        if error is not None:
            raise error

    async def create_partitions(
        self, counts: Mapping[str, int], *, validate_only: bool = False, timeout_ms: int = ADMIN_TIMEOUT_MS
    ) -> dict[str, KafkaError | None]:
        """Grow each topic of ``{name: new partition count}`` (the broker places the new partitions); returns each
        topic's error (None when grown, or when ``validate_only`` found nothing wrong)."""
        body = {
            "topics": [{"name": name, "count": n, "assignments": None} for name, n in counts.items()],
            "timeout_ms": timeout_ms,
            "validate_only": validate_only,
        }
        resp = await self._cluster.request(await self._controller(), ApiKey.CREATE_PARTITIONS, body)
        self._cluster.invalidate()
        return {r.name: error_for(r.error_code, r.error_message) if r.error_code else None for r in resp.results}

    async def delete_topics(
        self, names: Iterable[str], *, timeout_ms: int = ADMIN_TIMEOUT_MS
    ) -> dict[str, KafkaError | None]:
        names = list(names)
        body = {"topic_names": names, "topics": [{"name": n} for n in names], "timeout_ms": timeout_ms}
        resp = await self._cluster.request(await self._controller(), ApiKey.DELETE_TOPICS, body)
        self._cluster.invalidate()
        return {r.name: error_for(r.error_code, r.error_message) if r.error_code else None for r in resp.responses}

    async def list_topics(self, *, internal: bool = False) -> dict[str, int]:
        """``{topic: partition count}`` of every topic (internal ones only when asked)."""
        resp = await self._cluster.refresh_metadata(None)
        return {t.name: len(t.partitions) for t in resp.topics if t.error_code == 0 and (internal or not t.is_internal)}

    async def request_topics(self, names: Iterable[str]) -> dict[str, int]:
        """``{topic: partition count}`` of those of ``names`` that exist once the broker has answered a Metadata
        request for them that allows auto-creation (so it creates those it creates on first use)."""
        resp = await self._cluster.refresh_metadata(list(names), allow_auto_create=True)
        return {t.name: len(t.partitions) for t in resp.topics if t.error_code == 0}

    async def describe_topics(self, names: Iterable[str]) -> dict[str, dict[int, int]]:
        """``{topic: {partition: leader node id}}``; raises the error of an unknown topic."""
        resp = await self._cluster.refresh_metadata(list(names), allow_auto_create=False)
        out = {}
        for t in resp.topics:
            if t.error_code:
                raise error_for(t.error_code, f"topic {t.name}")
            parts = sorted(t.partitions, key=lambda p: p.partition_index)
            out[t.name] = {p.partition_index: p.leader_id for p in parts}
        return out

    async def describe_partitions(self, names: Iterable[str] | None) -> dict[str, list[PartitionReplicas]]:
        """Each topic's partitions with leader, replicas, ISR and offline replicas (every topic when ``names`` is
        None); raises the error of an unknown topic."""
        resp = await self._cluster.refresh_metadata(None if names is None else list(names), allow_auto_create=False)
        out: dict[str, list[PartitionReplicas]] = {}
        for t in resp.topics:
            if t.error_code:
                raise error_for(t.error_code, f"topic {t.name}")
            out[t.name] = [
                PartitionReplicas(
                    p.partition_index,
                    p.leader_id,
                    p.leader_epoch,
                    tuple(p.replica_nodes),
                    tuple(p.isr_nodes),
                    tuple(p.offline_replicas or ()),
                )
                for p in sorted(t.partitions, key=lambda p: p.partition_index)
            ]
        return out

    async def describe_cluster(self) -> ClusterDescription:
        """The cluster id, the controller, the live brokers and every partition's replication state (Metadata)."""
        partitions = await self.describe_partitions(None)
        resp = self._cluster
        brokers = tuple(
            BrokerNode(node_id, host, port, self._cluster.racks.get(node_id))
            for node_id, (host, port) in sorted(resp.brokers.items())
        )
        return ClusterDescription(resp.cluster_id, resp.controller_id, brokers, partitions)

    async def delete_records(
        self, offsets: Mapping[TopicPartition, int], *, timeout_ms: int = ADMIN_TIMEOUT_MS
    ) -> dict[TopicPartition, int]:
        """Delete the records below each partition's offset (``HIGH_WATERMARK``, -1: below its high watermark);
        returns each partition's new low watermark (log start offset), durable when this returns.

        DeleteRecords goes to each partition's leader. If any partition fails (OFFSET_OUT_OF_RANGE above the high
        watermark, UNKNOWN_TOPIC_OR_PARTITION, POLICY_VIOLATION on a compacted topic, ...) the error of the first
        one is raised, naming each failed partition; the other partitions' deletions still took effect."""
        by_node: dict[int, dict[str, list[dict[str, int]]]] = {}
        for tp, offset in offsets.items():
            topics = by_node.setdefault(await self._cluster.leader_for(tp), {})
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "offset": offset})
        out: dict[TopicPartition, int] = {}
        errors: dict[TopicPartition, int] = {}
        for node, topics in by_node.items():
            body = {"topics": [{"name": t, "partitions": ps} for t, ps in topics.items()], "timeout_ms": timeout_ms}
            resp = await self._cluster.request(node, ApiKey.DELETE_RECORDS, body)
            for t in resp.topics:
                for p in t.partitions:
                    tp = TopicPartition(t.name, p.partition_index)
                    errors[tp] = p.error_code
                    out[tp] = p.low_watermark
        if any(errors.values()):
            self._cluster.invalidate()  # a moved leader or a deleted topic: look the leaders up again next time
        raise_partition_errors("DeleteRecords", errors)
        return out

    async def describe_log_dirs(self, topics: Iterable[str] | None = None) -> list[LogDirDescription]:
        """Every broker's log directories with the size in bytes of each partition they hold: of ``topics`` only
        (raising the error of an unknown one), or of every partition, internal ones included, when None. Sorted
        by broker id; raises a broker's or a directory's error."""
        wanted = None
        if topics is not None:
            counts = {name: len(parts) for name, parts in (await self.describe_topics(topics)).items()}
            wanted = [{"topic": name, "partitions": list(range(n))} for name, n in counts.items()]
        await self._cluster.refresh_metadata([])
        out: list[LogDirDescription] = []
        for node in sorted(self._cluster.brokers):
            resp = await self._cluster.request(node, ApiKey.DESCRIBE_LOG_DIRS, {"topics": wanted})
            if getattr(resp, "error_code", 0):
                raise error_for(resp.error_code, f"DescribeLogDirs broker {node}")
            for d in resp.results:
                if d.error_code:
                    raise error_for(d.error_code, f"DescribeLogDirs broker {node} {d.log_dir}")
                sizes = {
                    TopicPartition(t.name, p.partition_index): p.partition_size for t in d.topics for p in t.partitions
                }
                out.append(
                    LogDirDescription(
                        node, d.log_dir, sizes, getattr(d, "total_bytes", -1), getattr(d, "usable_bytes", -1)
                    )
                )
        return out

    async def describe_configs(
        self, resource_type: str, name: str, keys: Iterable[str] | None = None
    ) -> dict[str, str | None]:
        """Config values of a ``"topic"`` or ``"broker"`` (by node id as a string)."""
        body = {
            "resources": [
                {
                    "resource_type": RESOURCE_TYPES[resource_type],
                    "resource_name": name,
                    "configuration_keys": None if keys is None else list(keys),
                }
            ]
        }
        node = int(name) if resource_type == "broker" else None
        resp = await self._cluster.request(node, ApiKey.DESCRIBE_CONFIGS, body)
        result = resp.results[0]
        if result.error_code:
            raise error_for(result.error_code, result.error_message)
        return {c.name: c.value for c in result.configs}

    async def incremental_alter_configs(
        self, resource_type: str, name: str, ops: Iterable[tuple[str, str, str | None]], *, validate_only: bool = False
    ) -> None:
        """Apply ``(config, op, value)`` operations to a ``"topic"``'s (or ``"broker"``'s) configs, op one of
        ``CONFIG_OPS`` (value None for "delete"), e.g. ``[("retention.ms", "set", "60000")]``. Raises the
        resource's error; once it returns the change is durable and in effect (unless ``validate_only``)."""
        configs = [{"name": key, "config_operation": CONFIG_OPS[op], "value": value} for key, op, value in ops]
        body = {
            "resources": [{"resource_type": RESOURCE_TYPES[resource_type], "resource_name": name, "configs": configs}],
            "validate_only": validate_only,
        }
        node = int(name) if resource_type == "broker" and name else None
        resp = await self._cluster.request(node, ApiKey.INCREMENTAL_ALTER_CONFIGS, body)
        result = resp.responses[0]
        if result.error_code:
            raise error_for(result.error_code, result.error_message)

    # --- transactions (KIP-664) ---------------------------------------------------------------------------

    async def list_transactions(
        self, *, states: Iterable[str] = (), producer_ids: Iterable[int] = (), duration_ms: int = -1
    ) -> list[TransactionListing]:
        """Every broker's ListTransactions answer, merged."""
        await self._cluster.refresh_metadata([])
        out: list[TransactionListing] = []
        body = {
            "state_filters": list(states),
            "producer_id_filters": list(producer_ids),
            "duration_filter": duration_ms,
        }
        for node in sorted(self._cluster.brokers):
            resp = await self._cluster.request(node, ApiKey.LIST_TRANSACTIONS, body)
            if resp.error_code:
                raise error_for(resp.error_code, "ListTransactions")
            out += [
                TransactionListing(t.transactional_id, t.producer_id, t.transaction_state)
                for t in resp.transaction_states
            ]
        return out

    async def describe_transactions(self, transactional_ids: Iterable[str]) -> dict[str, TransactionDescription]:
        out = {}
        for tid in transactional_ids:
            node = await self._cluster.coordinator(COORDINATOR_TRANSACTION, tid)
            resp = await self._cluster.request(node, ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [tid]})
            for s in resp.transaction_states:
                if s.error_code:
                    raise error_for(s.error_code, f"DescribeTransactions {s.transactional_id}")
                out[s.transactional_id] = TransactionDescription(
                    s.transactional_id,
                    s.transaction_state,
                    s.producer_id,
                    s.producer_epoch,
                    s.transaction_timeout_ms,
                    s.transaction_start_time_ms,
                    [TopicPartition(t.topic, p) for t in s.topics for p in t.partitions],
                )
        return out

    async def describe_producers(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, list[ProducerState]]:
        """Active producers of each partition (DescribeProducers, sent to the partition's leader)."""
        by_node: dict[int, list[TopicPartition]] = {}
        for tp in partitions:
            by_node.setdefault(await self._cluster.leader_for(tp), []).append(tp)
        out: dict[TopicPartition, list[ProducerState]] = {}
        for node, tps in by_node.items():
            topics: dict[str, list[int]] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(tp.partition)
            body = {"topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]}
            resp = await self._cluster.request(node, ApiKey.DESCRIBE_PRODUCERS, body)
            for t in resp.topics:
                for p in t.partitions:
                    if p.error_code:
                        raise error_for(p.error_code, p.error_message)
                    out[TopicPartition(t.name, p.partition_index)] = [
                        ProducerState(
                            a.producer_id,
                            a.producer_epoch,
                            a.last_sequence,
                            a.last_timestamp,
                            a.coordinator_epoch,
                            a.current_txn_start_offset,
                        )
                        for a in p.active_producers
                    ]
        return out

    async def abort_transaction(
        self, tp: TopicPartition, producer_id: int, producer_epoch: int, coordinator_epoch: int = 0
    ) -> None:
        """Write an ABORT marker for a hanging transaction of ``producer_id`` to ``tp`` (WriteTxnMarkers, sent
        to the partition's leader), as Kafka's ``kafka-transactions.sh abort`` does."""
        body = {
            "markers": [
                {
                    "producer_id": producer_id,
                    "producer_epoch": producer_epoch,
                    "transaction_result": False,
                    "coordinator_epoch": coordinator_epoch,
                    "topics": [{"name": tp.topic, "partition_indexes": [tp.partition]}],
                }
            ]
        }
        resp = await self._cluster.request(await self._cluster.leader_for(tp), ApiKey.WRITE_TXN_MARKERS, body)
        for marker in resp.markers:
            for t in marker.topics:
                for p in t.partitions:
                    if p.error_code and p.error_code != ErrorCode.NONE:
                        raise error_for(p.error_code, f"WriteTxnMarkers {t.name}-{p.partition_index}")

    async def end_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        *,
        commit: bool,
        max_block_ms: int = MAX_BLOCK_MS,
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
    ) -> None:
        """Commit (or abort) the open transaction of ``producer_id``/``producer_epoch`` (EndTxn to its coordinator),
        for a process that holds just those ids and not the producer that began it.

        Coordinator moves, loading, CONCURRENT_TRANSACTIONS and connection errors are retried until
        ``max_block_ms`` (then KafkaTimeoutError); any other error raises as a KafkaError with its code. A repeated
        EndTxn with the same outcome succeeds (the coordinator answers it so)."""
        body = {
            "transactional_id": transactional_id,
            "producer_id": producer_id,
            "producer_epoch": producer_epoch,
            "committed": commit,
        }
        resp = await coordinator_request(
            self._cluster,
            ApiKey.END_TXN,
            body,
            lambda r: [r.error_code],
            key_type=COORDINATOR_TRANSACTION,
            coordinator_key=transactional_id,
            max_block_ms=max_block_ms,
            retry_backoff_ms=retry_backoff_ms,
        )
        if resp.error_code != ErrorCode.NONE:
            raise error_for(resp.error_code, f"EndTxn(commit={commit}) for {transactional_id}")

    async def find_hanging_transactions(self, topics: Iterable[str] | None = None) -> list[HangingTransaction]:
        """Open transactions on the partitions of ``topics`` (default: every non-internal topic) that no
        coordinator has open on that partition, as Kafka's ``kafka-transactions.sh find-hanging`` finds them.

        Each partition's producers come from DescribeProducers; one with ``current_txn_start_offset >= 0`` is
        matched against ListTransactions (filtered by its producer id) and DescribeTransactions. A candidate is
        reported only if a second DescribeProducers still shows the same producer with the same start offset,
        so a transaction that ended (or began) between the looks is not reported. Sorted by topic, partition,
        producer id.
        """
        if topics is None:
            counts = await self.list_topics()
        else:
            counts = {name: len(parts) for name, parts in (await self.describe_topics(topics)).items()}
        tps = [TopicPartition(t, p) for t, n in sorted(counts.items()) for p in range(n)]
        if not tps:
            return []
        open_txns = {
            (tp, s.producer_id): s
            for tp, states in (await self.describe_producers(tps)).items()
            for s in states
            if s.current_txn_start_offset >= 0
        }
        if not open_txns:
            return []
        listings = await self.list_transactions(producer_ids=sorted({pid for _tp, pid in open_txns}))
        descriptions = await self._describe_existing({t.transactional_id for t in listings})
        candidates = {key: s for key, s in open_txns.items() if not coordinator_has_open(descriptions, key[1], key[0])}
        if not candidates:
            return []
        again = await self.describe_producers(sorted({tp for tp, _pid in candidates}))
        still = {(tp, s.producer_id): s.current_txn_start_offset for tp, states in again.items() for s in states}
        return [
            HangingTransaction(
                tp.topic,
                tp.partition,
                pid,
                s.producer_epoch,
                s.coordinator_epoch,
                s.current_txn_start_offset,
                s.last_timestamp,
            )
            for (tp, pid), s in sorted(candidates.items())
            if still.get((tp, pid)) == s.current_txn_start_offset
        ]

    async def _describe_existing(self, transactional_ids: Iterable[str]) -> list[TransactionDescription]:
        """DescribeTransactions of each id, leaving out the ids that expired since they were listed."""
        out = []
        for tid in sorted(transactional_ids):
            try:
                out += (await self.describe_transactions([tid])).values()
            except KafkaError as exc:
                if exc.code != ErrorCode.TRANSACTIONAL_ID_NOT_FOUND:
                    raise
        return out

    # --- consumer groups ----------------------------------------------------------------------------------

    async def list_groups(self, *, states: Iterable[str] = ()) -> list[GroupListing]:
        """Every broker's ListGroups answer, merged."""
        await self._cluster.refresh_metadata([])
        out: list[GroupListing] = []
        for node in sorted(self._cluster.brokers):
            resp = await self._cluster.request(node, ApiKey.LIST_GROUPS, {"states_filter": list(states)})
            if resp.error_code:
                raise error_for(resp.error_code, "ListGroups")
            out += [GroupListing(g.group_id, g.protocol_type, g.group_state) for g in resp.groups]
        return out

    async def describe_groups(self, group_ids: Iterable[str]) -> dict[str, GroupDescription]:
        out = {}
        for gid in group_ids:
            node = await self._cluster.coordinator(COORDINATOR_GROUP, gid)
            resp = await self._cluster.request(node, ApiKey.DESCRIBE_GROUPS, {"groups": [gid]})
            for g in resp.groups:
                if g.error_code:
                    raise error_for(g.error_code, f"DescribeGroups {g.group_id}")
                members = [
                    MemberDescription(
                        m.member_id,
                        m.client_id,
                        m.client_host,
                        decode_assignment(m.member_assignment) if g.protocol_type == "consumer" else [],
                    )
                    for m in g.members
                ]
                out[g.group_id] = GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data, members)
        return out

    async def list_group_offsets(self, group_id: str) -> dict[TopicPartition, int]:
        """Every committed offset of ``group_id`` (OffsetFetch with null topics, v2+), from its coordinator."""
        node = await self._cluster.coordinator(COORDINATOR_GROUP, group_id)
        body = {"group_id": group_id, "topics": None, "require_stable": False}
        resp = await self._cluster.request(node, ApiKey.OFFSET_FETCH, body)
        if resp.error_code:
            if resp.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self._cluster.forget_coordinator(COORDINATOR_GROUP, group_id)
            raise error_for(resp.error_code, f"OffsetFetch {group_id}")
        out: dict[TopicPartition, int] = {}
        for t in resp.topics:
            for p in t.partitions:
                if p.error_code:
                    raise error_for(p.error_code, f"OffsetFetch {group_id} {t.name}-{p.partition_index}")
                if p.committed_offset >= 0:
                    out[TopicPartition(t.name, p.partition_index)] = p.committed_offset
        return out

    async def delete_group_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> None:
        """Delete ``group_id``'s committed offsets of ``partitions`` (OffsetDelete, KIP-496, sent to the group's
        coordinator); the deletions are durable when this returns.

        A group-level error is raised for the whole call (GROUP_ID_NOT_FOUND; NON_EMPTY_GROUP for an active
        non-consumer group). Otherwise, if a partition fails -- GROUP_SUBSCRIBED_TO_TOPIC when an active member
        subscribes to its topic, UNKNOWN_TOPIC_OR_PARTITION -- the error of the first one is raised, naming each
        failed partition; the other partitions' offsets are deleted all the same."""
        topics: dict[str, list[dict[str, int]]] = {}
        for tp in partitions:
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition})
        body = {"group_id": group_id, "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        node = await self._cluster.coordinator(COORDINATOR_GROUP, group_id)
        resp = await self._cluster.request(node, ApiKey.OFFSET_DELETE, body)
        if resp.error_code:
            if resp.error_code in (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE):
                self._cluster.forget_coordinator(COORDINATOR_GROUP, group_id)
            raise error_for(resp.error_code, f"OffsetDelete {group_id}")
        raise_partition_errors(
            f"OffsetDelete {group_id}",
            {TopicPartition(t.name, p.partition_index): p.error_code for t in resp.topics for p in t.partitions},
        )
