"""What a request handler may use of the broker: the components the node builds, wires and owns.

Handlers (broker/apis/) are typed against this Protocol rather than the node module, so they depend on the
components they call, not on the class that assembles them; ``BrokerNode`` satisfies it. The layering contract
in pyproject.toml keeps broker/apis/ from importing broker/node.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from oncelog.broker.cluster.member import ClusterMember
    from oncelog.broker.cluster.view import ClusterView
    from oncelog.broker.config import BrokerConfig
    from oncelog.broker.dynamic_config import DynamicBrokerConfigs
    from oncelog.broker.fetch_sessions import FetchSessions
    from oncelog.broker.group.consumer_coordinator import ConsumerGroupCoordinator
    from oncelog.broker.group.coordinator import GroupCoordinator
    from oncelog.broker.group_configs import GroupConfigs
    from oncelog.broker.listeners import Endpoint
    from oncelog.broker.metadata import MetadataStore
    from oncelog.broker.producer_ids import ProducerIdAllocator
    from oncelog.broker.replica_manager import ReplicaManager
    from oncelog.broker.sasl.credentials import ScramCredentialStore
    from oncelog.broker.topics import TopicManager
    from oncelog.broker.txn.coordinator import TransactionCoordinator
    from oncelog.storage.log import PartitionLog
    from oncelog.storage.log_manager import LogManager


class Broker(Protocol):
    """The broker as its request handlers see it."""

    config: BrokerConfig
    static_config: BrokerConfig
    dynamic_configs: DynamicBrokerConfigs
    node_id: int
    data_dir: Path
    metadata: MetadataStore
    logs: LogManager
    replicas: ReplicaManager
    #: Followers' incremental fetch sessions (KIP-227) with this broker as their leader.
    fetch_sessions: FetchSessions
    producer_ids: ProducerIdAllocator
    topics: TopicManager
    transactions: TransactionCoordinator
    groups: GroupCoordinator
    #: KIP-848 consumer groups (their offsets are kept by ``groups``).
    consumer_groups: ConsumerGroupCoordinator
    scram_credentials: ScramCredentialStore
    group_configs: GroupConfigs
    #: Brokers, controller and partition replication states (one node, or the etcd image on a cluster).
    cluster: ClusterView
    #: This broker's membership of an etcd cluster; None on a single node.
    member: ClusterMember | None

    def advertised_for(self, listener_name: str | None) -> Endpoint:
        """Where clients of the listener named ``listener_name`` (None: the first) are told to connect."""
        ...

    def alter_dynamic_configs(self, per_broker: bool, configs: Mapping[str, str]) -> None:
        """Persist and apply the dynamic broker configs of this broker (``per_broker``) or the cluster default."""
        ...

    async def ensure_offsets_topic(self) -> None:
        """Create ``__consumer_offsets`` on first use; returns once its logs exist."""
        ...

    async def delete_segments_below_start(self, partition_logs: Iterable[PartitionLog], timeout_s: float) -> None:
        """Delete the segments wholly below each log's start offset (after DeleteRecords), or leave them to the
        next retention sweep."""
        ...
