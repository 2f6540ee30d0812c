"""A cluster of three broker processes on one etcd, seen through a stock client (confluent-kafka's admin client):
registration, the controller, replica placement at CreateTopics, leader election when a broker dies, controlled
shutdown and topic deletion everywhere."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio
from confluent_kafka import ElectionType, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    PartitionMetadata,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)
from oncelog.broker.controller.controller import controlled_shutdown
from oncelog.broker.etcd.client import EtcdClient
from oncelog.broker.etcd.connect import parse_etcd_connect
from oncelog.broker.etcd.image import MetadataFollower
from oncelog.broker.etcd.layout import Layout
from oncelog.client.connection import BrokerConnection
from oncelog.client.delay import CANCEL_TOPIC
from oncelog.protocol import ApiKey, ErrorCode
from support.cluster import Cluster


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A fresh cluster for a test that kills or stops a broker."""
    with Cluster(3) as running:
        yield running


#: More replicas for ``__consumer_offsets`` than ``healthy_cluster`` has brokers: the topic cannot be created there,
#: as on a cluster with fewer live brokers than the factor (Kafka: "Internal topic creation will fail until the
#: cluster size meets this replication factor requirement"). No other test of that cluster uses groups.
UNREACHABLE_OFFSETS_FACTOR = 4


@pytest.fixture(scope="module")
def healthy_cluster() -> Iterator[Cluster]:
    """One cluster shared by the tests that leave every broker running (each uses topics of its own names): a
    cluster start is seconds of CI each. Its ``__consumer_offsets`` cannot be created (see
    ``UNREACHABLE_OFFSETS_FACTOR``)."""
    with Cluster(3, {"offsets.topic.replication.factor": UNREACHABLE_OFFSETS_FACTOR}) as running:
        yield running


def create(cluster: Cluster, name: str, partitions: int, replication_factor: int) -> None:
    admin = cluster.admin()  # kept alive until the answer arrives
    futures = admin.create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor)], operation_timeout=30
    )
    futures[name].result(timeout=60)


def test_every_broker_reports_every_broker_and_one_controller(healthy_cluster: Cluster) -> None:
    controllers = set()
    for node_id in healthy_cluster.brokers:
        metadata = healthy_cluster.metadata(via=node_id)
        assert sorted(metadata.brokers) == [1, 2, 3]
        assert {b.port for b in metadata.brokers.values()} == {b.port for b in healthy_cluster.brokers.values()}
        controllers.add(metadata.controller_id)
    assert len(controllers) == 1
    assert controllers <= {1, 2, 3}
    cluster_ids = {healthy_cluster.metadata(via=n).cluster_id for n in healthy_cluster.brokers}
    assert len(cluster_ids) == 1


def test_a_replicated_topic_is_placed_over_every_broker(healthy_cluster: Cluster) -> None:
    create(healthy_cluster, "orders", partitions=6, replication_factor=3)
    metadata = healthy_cluster.wait_for(lambda md: "orders" in md.topics, "orders")
    partitions = metadata.topics["orders"].partitions
    assert len(partitions) == 6
    for p in partitions.values():
        assert sorted(p.replicas) == [1, 2, 3]
        assert sorted(p.isrs) == [1, 2, 3]
        assert p.leader == p.replicas[0]
    # Leadership is spread: each broker leads two of the six partitions.
    assert sorted(p.leader for p in partitions.values()) == [1, 1, 2, 2, 3, 3]
    # Every broker made the logs of every partition it holds a replica of (all six, here).
    for broker in healthy_cluster.brokers.values():
        deadline = time.monotonic() + 10
        while len(list(broker.data_dir.glob("orders-*"))) < 6 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sorted(d.name for d in broker.data_dir.glob("orders-*")) == [f"orders-{i}" for i in range(6)]


def test_replication_factor_above_the_broker_count_is_refused(healthy_cluster: Cluster) -> None:
    with pytest.raises(KafkaException) as refused:
        create(healthy_cluster, "too-many", partitions=1, replication_factor=4)
    assert refused.value.args[0].name() == "INVALID_REPLICATION_FACTOR"


def _replicated_partition(cluster: Cluster, name: str) -> PartitionMetadata:
    """A new topic of one partition on all three brokers, once all three are in its ISR."""
    create(cluster, name, partitions=1, replication_factor=3)
    full = cluster.wait_for(lambda md: name in md.topics and len(md.topics[name].partitions[0].isrs) == 3, "full ISR")
    return full.topics[name].partitions[0]


def test_a_killed_leader_is_replaced_from_the_isr(cluster: Cluster) -> None:
    create(cluster, "failover", partitions=3, replication_factor=3)
    before = cluster.wait_for(lambda md: "failover" in md.topics, "failover").topics["failover"].partitions
    victim = before[0].leader
    cluster.brokers[victim].kill()
    after = cluster.wait_for(
        lambda md: (
            victim not in md.brokers
            and all(p.leader not in (victim, -1) for p in md.topics["failover"].partitions.values())
        ),
        f"new leaders without broker {victim}",
    )
    for p in after.topics["failover"].partitions.values():
        assert victim not in p.isrs
        assert sorted(p.isrs) == sorted(r for r in p.replicas if r != victim)
    # A broker that comes back is registered again (its replicas rejoin the ISR once they catch up: replication).
    cluster.brokers[victim].start()
    cluster.wait_for(lambda md: victim in md.brokers, f"broker {victim} back")


def test_a_broker_restarted_within_its_session_is_not_elected_from_its_stale_isr_entry(cluster: Cluster) -> None:
    """KIP-966's unclean shutdown: a follower SIGKILLed and restarted before its lease lapsed registers over its
    previous incarnation; the ISR entry of that incarnation goes, so once the other replicas are gone too it is not
    elected (it may lack the old process's unflushed tail and has not caught up as the new one)."""
    state = _replicated_partition(cluster, "unclean")
    restarted = next(r for r in state.replicas if r != state.leader)
    others = [r for r in state.replicas if r != restarted]
    cluster.brokers[restarted].kill()
    for other in others:  # gone before the restarted broker can catch up and rejoin under its new incarnation
        cluster.brokers[other].kill()
    cluster.brokers[restarted].start()  # its previous lease still lives (broker.session.timeout.ms)
    cluster.wait_for(lambda md: sorted(md.brokers) == [restarted], "the other brokers' sessions to lapse")
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        partition = cluster.metadata().topics["unclean"].partitions[0]
        assert partition.leader != restarted and restarted not in partition.isrs, (partition.leader, partition.isrs)
        time.sleep(0.2)


def test_the_controller_moves_when_its_broker_dies(cluster: Cluster) -> None:
    controller = cluster.metadata().controller_id
    cluster.brokers[controller].kill()
    metadata = cluster.wait_for(
        lambda md: md.controller_id not in (controller, -1) and controller not in md.brokers, "a new controller"
    )
    assert metadata.controller_id in set(cluster.brokers) - {controller}


def test_controlled_shutdown_moves_leadership_before_the_broker_stops(cluster: Cluster) -> None:
    create(cluster, "handover", partitions=3, replication_factor=3)
    before = cluster.wait_for(lambda md: "handover" in md.topics, "handover").topics["handover"].partitions
    leaving = before[0].leader
    assert cluster.brokers[leaving].stop() == 0
    # No wait for a session to lapse: the leaderships moved before the process ended.
    metadata = cluster.metadata()
    for p in metadata.topics["handover"].partitions.values():
        assert p.leader not in (leaving, -1)
        assert leaving not in p.isrs


def test_a_broker_in_controlled_shutdown_is_not_taken_back_into_the_isr(cluster: Cluster) -> None:
    """Kafka refuses ISR expansion to a replica of a broker in controlled shutdown (INELIGIBLE_REPLICA). The first
    steps of ``ClusterMember.shut_down`` stand in for a shutdown that lasts (the mark under the broker's lease, then
    its ISR memberships moved away): the broker's real process, caught up, keeps fetching, yet stays out of the ISR
    it left; a real SIGTERM then completes. Nor does the controller elect it: its partition of a topic without
    other replicas stays without a leader (Kafka's controller elects no broker in controlled shutdown)."""
    state = _replicated_partition(cluster, "drained")
    leaving = next(r for r in state.replicas if r != state.leader)
    create(cluster, "alone", partitions=3, replication_factor=1)  # one partition on each broker
    alone = cluster.wait_for(lambda md: "alone" in md.topics, "alone").topics["alone"].partitions
    (only_on_leaving,) = [p for p, meta in alone.items() if meta.replicas == [leaving]]
    trio.run(_begin_controlled_shutdown, cluster, leaving)
    cluster.wait_for(
        lambda md: (
            leaving not in md.topics["drained"].partitions[0].isrs
            and md.topics["alone"].partitions[only_on_leaving].leader == -1
        ),
        "the ISR without the leaving broker, and its own partition without a leader",
    )
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:  # caught up and fetching all along: without the refusal it is back in 0.5 s
        metadata = cluster.metadata()
        assert leaving not in metadata.topics["drained"].partitions[0].isrs
        assert metadata.topics["alone"].partitions[only_on_leaving].leader == -1  # not handed back to it
        time.sleep(0.2)
    assert cluster.brokers[leaving].stop() == 0


async def _begin_controlled_shutdown(cluster: Cluster, broker: int) -> None:
    layout = Layout(parse_etcd_connect(f"{cluster.etcd.endpoint}/oncelog"))
    async with EtcdClient([cluster.etcd.url]) as client:
        registration = await client.get(layout.broker(broker))
        assert registration is not None
        await client.put(layout.shutting_down(broker), b"", lease=registration.lease)
        async with trio.open_nursery() as nursery:
            image = await nursery.start(MetadataFollower(client, layout).run)
            await controlled_shutdown(client, layout, image, broker)
            nursery.cancel_scope.cancel()


def test_a_deleted_topic_is_gone_from_every_broker(healthy_cluster: Cluster) -> None:
    create(healthy_cluster, "short-lived", partitions=2, replication_factor=3)
    healthy_cluster.wait_for(lambda md: "short-lived" in md.topics, "short-lived")
    admin = healthy_cluster.admin()
    admin.delete_topics(["short-lived"], operation_timeout=30)["short-lived"].result(timeout=60)
    for node_id, broker in healthy_cluster.brokers.items():
        healthy_cluster.wait_for(lambda md: "short-lived" not in md.topics, "deletion", via=node_id)
        deadline = time.monotonic() + 10
        while list(broker.data_dir.glob("short-lived-*")) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not list(broker.data_dir.glob("short-lived-*"))


def oncelog(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(Path(sys.executable).parent / "oncelog"), *args], capture_output=True, text=True, timeout=60, check=False
    )


def test_cluster_and_topic_describe_show_replicas_isr_and_lost_brokers(cluster: Cluster) -> None:
    create(cluster, "described", partitions=3, replication_factor=3)
    cluster.wait_for(lambda md: "described" in md.topics, "described")
    healthy = oncelog("cluster", "describe", "-b", cluster.bootstrap)
    assert healthy.returncode == 0, healthy.stderr
    lines = healthy.stdout.splitlines()
    assert lines[0].startswith("cluster_id=") and f"controller={cluster.metadata().controller_id}" in lines[0]
    assert [line.split("\t")[0] for line in lines[1:4]] == ["broker=1", "broker=2", "broker=3"]
    assert "\tunder_replicated=0\toffline=0" in lines[4]
    topic = oncelog("topic", "describe", "described", "-b", cluster.bootstrap).stdout.splitlines()
    assert topic[0] == "described\tpartitions=3\treplication_factor=3"
    assert all("\treplicas=" in line and "\tisr=" in line for line in topic[1:])

    cluster.brokers[3].kill()
    cluster.wait_for(lambda md: 3 not in md.brokers, "broker 3 gone")
    degraded = oncelog("cluster", "describe", "-b", cluster.live_bootstrap())
    assert degraded.returncode == 1
    under = [line for line in degraded.stdout.splitlines() if line.startswith("under-replicated\ttopic=described")]
    assert len(under) == 3
    assert all(
        "\toffline=3" in line and "isr=" in line and "3" not in line.split("isr=")[1].split("\t")[0] for line in under
    )

    # A delay topic is created on first use with the offsets topic's replication factor (3), impossible over two
    # live brokers: Metadata answers INVALID_REPLICATION_FACTOR for it, as Kafka's auto-creation does, and the
    # connection stays (it used to be dropped, each time the client asked again).
    answers = anyio.run(_metadata_twice, cluster.brokers[1].port, CANCEL_TOPIC)
    assert [(t.name, t.error_code) for answer in answers for t in answer.topics] == [
        (CANCEL_TOPIC, ErrorCode.INVALID_REPLICATION_FACTOR)
    ] * 2
    assert all(sorted(b.node_id for b in answer.brokers) == [1, 2] for answer in answers)

    # Likewise a coordinator whose internal topic (factor 3) cannot be created over two live brokers: FindCoordinator
    # answers COORDINATOR_NOT_AVAILABLE, as Kafka does until the cluster is large enough (it used to drop the
    # connection). A coordinator whose topic exists already is found, or not available while its leader moves.
    existing = cluster.metadata(via=1).topics
    for key_type, topic in ((0, "__consumer_offsets"), (1, "__transaction_state")):
        found = anyio.run(_find_coordinator_twice, cluster.brokers[1].port, key_type)
        codes = {entry.error_code for answer in found for entry in answer.coordinators}
        if topic in existing:
            assert codes <= {ErrorCode.NONE, ErrorCode.COORDINATOR_NOT_AVAILABLE}, (topic, codes)
        else:
            assert codes == {ErrorCode.COORDINATOR_NOT_AVAILABLE}, (topic, codes)

    # InitProducerId for a transactional id whose __transaction_state cannot be created: NOT_COORDINATOR (Kafka's
    # TransactionStateManager for a partition it does not host), the connection kept (it used to be dropped).
    init = {"transactional_id": "k", "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    inits = anyio.run(_twice, cluster.brokers[1].port, ApiKey.INIT_PRODUCER_ID, 4, init)
    if "__transaction_state" not in existing:
        assert [answer.error_code for answer in inits] == [ErrorCode.NOT_COORDINATOR] * 2


async def _metadata_twice(port: int, topic: str) -> list:
    """Two Metadata requests for ``topic`` on one connection."""
    return await _twice(port, ApiKey.METADATA, 9, {"topics": [{"name": topic}], "allow_auto_topic_creation": False})


async def _find_coordinator_twice(port: int, key_type: int) -> list:
    """Two FindCoordinator (v4) requests for one key of ``key_type`` on one connection."""
    return await _twice(port, ApiKey.FIND_COORDINATOR, 4, {"key_type": key_type, "coordinator_keys": ["k"]})


async def _twice(port: int, api_key: ApiKey, version: int, body: dict) -> list:
    async with anyio.create_task_group() as tg:
        connection = BrokerConnection("127.0.0.1", port)
        await connection.open(tg)
        try:
            return [await connection.request(api_key, body, version=version) for _ in range(2)]
        finally:
            await connection.aclose()


def test_a_transaction_sends_offsets_while_the_offsets_topic_cannot_be_created(healthy_cluster: Cluster) -> None:
    """A producer whose transaction coordinator is found (``__transaction_state`` exists) sends offsets while
    ``__consumer_offsets`` cannot be created, and gets Kafka's answers: AddOffsetsToTxn adds the group's partition
    without the topic (KafkaApis computes it from offsets.topic.num.partitions); TxnOffsetCommit, at any broker,
    answers COORDINATOR_NOT_AVAILABLE (Kafka's verification of a partition that does not exist) and OffsetCommit
    and JoinGroup NOT_COORDINATOR (no coordinator hosts the partition); EndTxn commits, then aborts the next
    transaction (the marker channel skips a partition whose topic does not exist). Every connection stays open
    (AddOffsetsToTxn, TxnOffsetCommit, OffsetCommit and JoinGroup used to drop theirs)."""
    create(healthy_cluster, "offsets-source", partitions=1, replication_factor=3)
    ports = {node_id: broker.port for node_id, broker in healthy_cluster.brokers.items()}
    rounds, group_errors = anyio.run(_offsets_without_their_topic, ports)
    not_available = dict.fromkeys(ports, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    assert rounds == [
        (ErrorCode.NONE, not_available, ErrorCode.NONE, "CompleteCommit"),
        (ErrorCode.NONE, not_available, ErrorCode.NONE, "CompleteAbort"),
    ]
    assert group_errors == dict.fromkeys(ports, (ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_COORDINATOR))
    assert "__consumer_offsets" not in healthy_cluster.metadata().topics


#: Codes a request is sent again after while a coordinator settles (its partition gets a leader, which loads it).
_SETTLING = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.CONCURRENT_TRANSACTIONS,
}


async def _settled(connection: BrokerConnection, api_key: ApiKey, version: int, body: dict, code_of) -> Any:
    """The first answer (within 30 s) whose code is not a settling one."""
    with anyio.fail_after(30):
        while code_of(answer := await connection.request(api_key, body, version=version)) in _SETTLING:
            await anyio.sleep(0.1)
    return answer


async def _offsets_without_their_topic(ports: dict[int, int]) -> tuple[list[tuple], dict[int, tuple[int, int]]]:
    """Two transactions (committed, then aborted) that send offsets of a group. Per transaction: the error of
    AddOffsetsToTxn, of TxnOffsetCommit at each broker (node id -> error), of EndTxn, and the transaction's state
    right after EndTxn (Complete*: its markers are all written). Then each broker's (OffsetCommit, JoinGroup) error
    for the group. One connection per broker throughout: a dropped one fails the call."""
    txn, group = "offsets-without-their-topic", "offsets-group"
    offsets = [{"name": "offsets-source", "partitions": [{"partition_index": 0, "committed_offset": 1}]}]
    async with anyio.create_task_group() as tg:
        connections = {node_id: BrokerConnection("127.0.0.1", port) for node_id, port in ports.items()}
        for connection in connections.values():
            await connection.open(tg)
        try:
            lookup = {"key_type": 1, "coordinator_keys": [txn]}  # makes __transaction_state (factor 3)
            found = await _settled(next(iter(connections.values())), ApiKey.FIND_COORDINATOR, 4, lookup, _first_code)
            coordinator = connections[found.coordinators[0].node_id]
            init = {"transactional_id": txn, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
            producer = await _settled(coordinator, ApiKey.INIT_PRODUCER_ID, 4, init, lambda a: a.error_code)
            ids = {"transactional_id": txn, "producer_id": producer.producer_id}
            ids["producer_epoch"] = producer.producer_epoch
            txn_commit = {**ids, "group_id": group, "generation_id": -1, "member_id": "", "topics": offsets}
            rounds = []
            for committed in (True, False):
                added = await coordinator.request(ApiKey.ADD_OFFSETS_TO_TXN, {**ids, "group_id": group}, version=3)
                txn_errors = {
                    node_id: _partition_code(await c.request(ApiKey.TXN_OFFSET_COMMIT, txn_commit, version=3))
                    for node_id, c in connections.items()
                }
                ended = await coordinator.request(ApiKey.END_TXN, {**ids, "committed": committed}, version=3)
                described = await coordinator.request(ApiKey.DESCRIBE_TRANSACTIONS, {"transactional_ids": [txn]})
                (state,) = described.transaction_states
                rounds.append((added.error_code, txn_errors, ended.error_code, state.transaction_state))
            commit = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "topics": offsets}
            join = {
                "group_id": group,
                "session_timeout_ms": 10000,
                "rebalance_timeout_ms": 10000,
                "member_id": "",
                "group_instance_id": None,
                "protocol_type": "consumer",
                "protocols": [{"name": "range", "metadata": b""}],
            }
            group_errors = {
                node_id: (
                    _partition_code(await c.request(ApiKey.OFFSET_COMMIT, commit, version=8)),
                    (await c.request(ApiKey.JOIN_GROUP, join, version=5)).error_code,
                )
                for node_id, c in connections.items()
            }
            return rounds, group_errors
        finally:
            for connection in connections.values():
                await connection.aclose()


def _first_code(answer: Any) -> int:
    return answer.coordinators[0].error_code


def _partition_code(answer: Any) -> int:
    """The error of the one partition an OffsetCommit / TxnOffsetCommit answer carries."""
    ((partition,),) = [topic.partitions for topic in answer.topics]
    return partition.error_code


def test_topic_config_changes_reach_every_broker_and_stay(healthy_cluster: Cluster) -> None:
    create(healthy_cluster, "configured", partitions=1, replication_factor=3)
    admin = healthy_cluster.admin()
    resource = ConfigResource(ResourceType.TOPIC, "configured")
    resource.add_incremental_config(ConfigEntry("retention.ms", "123456", incremental_operation=AlterConfigOpType.SET))
    admin.incremental_alter_configs([resource])[resource].result(timeout=30)
    time.sleep(1)  # later images (any change) must not put the old value back
    create(healthy_cluster, "another", partitions=1, replication_factor=3)
    for broker in healthy_cluster.brokers.values():
        one = AdminClient({"bootstrap.servers": broker.bootstrap})
        described = one.describe_configs([ConfigResource(ResourceType.TOPIC, "configured")])
        configs = next(iter(described.values())).result(timeout=30)
        assert configs["retention.ms"].value == "123456"


def test_preferred_leader_election_moves_leadership_back(cluster: Cluster) -> None:
    create(cluster, "preferred", partitions=3, replication_factor=3)
    preferred = {p: pm.replicas[0] for p, pm in cluster.metadata().topics["preferred"].partitions.items()}
    moved = preferred[0]
    cluster.brokers[moved].stop()  # controlled shutdown: its leaderships go to other replicas
    cluster.brokers[moved].start()
    cluster.wait_for(
        lambda md: all(moved in pm.isrs for pm in md.topics["preferred"].partitions.values()),
        f"broker {moved} back in sync",
        timeout_s=60,
    )
    assert cluster.metadata().topics["preferred"].partitions[0].leader != moved  # no rebalance yet (300 s)
    admin = cluster.admin()
    partitions = [TopicPartition("preferred", p) for p in range(3)]
    results = admin.elect_leaders(ElectionType.PREFERRED, partitions).result(timeout=30)
    errors = {tp.partition: error for tp, error in results.items()}
    assert errors[0] is None
    assert all(e is None or e.code() == KafkaError.ELECTION_NOT_NEEDED for e in errors.values())
    cluster.wait_for(
        lambda md: {p: pm.leader for p, pm in md.topics["preferred"].partitions.items()} == preferred,
        "every partition led by its preferred replica",
    )


def test_scram_credentials_altered_through_one_broker_reach_every_broker(healthy_cluster: Cluster) -> None:
    admin = healthy_cluster.admin()
    alteration = UserScramCredentialUpsertion(
        "alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), b"alice-secret"
    )
    admin.alter_user_scram_credentials([alteration])["alice"].result(timeout=30)
    for node_id, broker in healthy_cluster.brokers.items():
        one = AdminClient({"bootstrap.servers": broker.bootstrap})
        described = one.describe_user_scram_credentials(["alice"])["alice"].result(timeout=30)
        infos = [(i.mechanism, i.iterations) for i in described.scram_credential_infos]
        assert infos == [(ScramMechanism.SCRAM_SHA_256, 8192)], node_id
        # Kept in the broker's data dir too, where SASL authentication reads it after a restart without etcd.
        assert "alice" in (broker.data_dir / "scram-credentials.json").read_text()
