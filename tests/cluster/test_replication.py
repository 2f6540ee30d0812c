"""Replication on a three-broker cluster, driven by stock clients (confluent-kafka): no acknowledged record is lost
or duplicated when a leader is SIGKILLed under acks=all idempotent production; the ISR shrinks and grows back in
Metadata; min.insync.replicas refusals; a controlled shutdown shows clients only retriable errors; a former leader
with a divergent tail truncates it when it rejoins; a broker whose data dir was wiped re-replicates."""

from __future__ import annotations

import os
import shutil
import signal
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator

import anyio
import pytest
import trio
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import NewTopic
from oncelog.broker.etcd.client import EtcdClient
from oncelog.broker.etcd.connect import parse_etcd_connect
from oncelog.broker.etcd.layout import Layout
from oncelog.client.connection import BrokerConnection
from oncelog.protocol import ApiKey, ErrorCode
from support.cluster import Cluster

#: Followers are dropped from the ISR after this long without catching up (Kafka's default is 30 s).
LAG_TIME_MS = 3000


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    """A fresh cluster for a test that kills, stops or wipes a broker."""
    with Cluster(3, settings={"replica.lag.time.max.ms": LAG_TIME_MS}) as running:
        yield running


@pytest.fixture(scope="module")
def healthy_cluster() -> Iterator[Cluster]:
    """One cluster shared by the tests that leave every broker running and in sync (each with topics of its own)."""
    with Cluster(3, settings={"replica.lag.time.max.ms": LAG_TIME_MS}) as running:
        yield running


def create(cluster: Cluster, name: str, partitions: int = 1, **configs: str) -> dict[int, list[int]]:
    admin = cluster.admin()
    topic = NewTopic(name, num_partitions=partitions, replication_factor=3, config=configs)
    admin.create_topics([topic])[name].result(timeout=60)
    metadata = cluster.wait_for(lambda md: name in md.topics, name)
    return {p: list(pm.replicas) for p, pm in metadata.topics[name].partitions.items()}


def leader_of(cluster: Cluster, topic: str, partition: int = 0) -> int:
    return cluster.metadata().topics[topic].partitions[partition].leader


def read_all(cluster: Cluster, topic: str, partitions: int, expected: int, timeout_s: float = 60) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.live_bootstrap(),
            "group.id": f"check-{uuid.uuid4()}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    values: list[bytes] = []
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
                    if len(at_end) == partitions and len(values) >= expected:
                        break
                continue
            at_end.discard(message.partition())
            values.append(message.value())
    finally:
        consumer.close()
    return values


def test_a_leader_killed_under_acks_all_idempotent_production_loses_and_duplicates_nothing(cluster: Cluster) -> None:
    create(cluster, "no-loss", partitions=3, **{"min.insync.replicas": "2"})
    victim = leader_of(cluster, "no-loss", 0)
    acknowledged: list[bytes] = []
    failed: list[str] = []
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 5,
            "message.timeout.ms": 60000,
        }
    )

    def delivered(error: KafkaError | None, message: object) -> None:
        if error is None:
            acknowledged.append(message.value())  # type: ignore[attr-defined]
        else:
            failed.append(error.str())

    total = 6000
    for i in range(total):
        producer.produce("no-loss", f"v{i}".encode(), partition=i % 3, on_delivery=delivered)
        if i % 200 == 0:
            producer.poll(0)
        if i == total // 3:
            cluster.brokers[victim].kill()
        if i % 500 == 0:
            time.sleep(0.05)
    assert producer.flush(90) == 0
    assert failed == []
    assert len(acknowledged) == total
    values = read_all(cluster, "no-loss", 3, total)
    counts = Counter(values)
    assert [v for v, n in counts.items() if n > 1] == []  # no duplicate
    assert set(acknowledged) <= set(counts)  # no acknowledged record lost
    # The killed broker comes back as a follower, catches up and rejoins every ISR.
    cluster.brokers[victim].start()
    cluster.wait_for(
        lambda md: all(victim in pm.isrs for pm in md.topics["no-loss"].partitions.values()),
        f"broker {victim} back in every ISR",
        timeout_s=60,
    )


def test_the_isr_shrinks_and_grows_back_and_min_insync_replicas_refuses(healthy_cluster: Cluster) -> None:
    create(healthy_cluster, "isr", **{"min.insync.replicas": "3"})
    leader = leader_of(healthy_cluster, "isr")
    follower = next(b for b in healthy_cluster.brokers if b != leader)
    producer = Producer({"bootstrap.servers": healthy_cluster.bootstrap, "acks": "all", "message.timeout.ms": 20000})
    producer.produce("isr", b"all three")
    assert producer.flush(30) == 0
    os.kill(healthy_cluster.brokers[follower].pid, signal.SIGSTOP)
    try:
        healthy_cluster.wait_for(
            lambda md: follower not in md.topics["isr"].partitions[0].isrs,
            f"broker {follower} dropped from the ISR",
            timeout_s=LAG_TIME_MS / 1000 + 20,
            via=leader,
        )
        # NOT_ENOUGH_REPLICAS is retriable: a producer that does not retry shows the broker's answer itself.
        once = Producer({"bootstrap.servers": healthy_cluster.bootstrap, "acks": "all", "retries": 0})
        errors: list[str] = []
        once.produce("isr", b"two of three", on_delivery=lambda e, m: errors.append(e.name() if e else "none"))
        once.flush(30)
        assert errors == ["NOT_ENOUGH_REPLICAS"]
    finally:
        os.kill(healthy_cluster.brokers[follower].pid, signal.SIGCONT)
    healthy_cluster.wait_for(
        lambda md: follower in md.topics["isr"].partitions[0].isrs,
        f"broker {follower} back in the ISR",
        timeout_s=30,
        via=leader,
    )
    producer.produce("isr", b"all three again")
    assert producer.flush(30) == 0


def test_a_controlled_shutdown_shows_clients_only_retriable_errors(cluster: Cluster) -> None:
    create(cluster, "handover", partitions=3, **{"min.insync.replicas": "2"})
    leaving = leader_of(cluster, "handover", 0)
    failed: list[str] = []
    acknowledged = 0
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "linger.ms": 2})

    def delivered(error: KafkaError | None, _message: object) -> None:
        nonlocal acknowledged
        if error is None:
            acknowledged += 1
        else:
            failed.append(error.str())

    stopper = threading.Thread(target=cluster.brokers[leaving].stop)
    total = 3000
    for i in range(total):
        producer.produce("handover", f"v{i}".encode(), partition=i % 3, on_delivery=delivered)
        producer.poll(0)
        if i == total // 3:
            stopper.start()
        if i % 100 == 0:
            time.sleep(0.02)
    assert producer.flush(60) == 0
    stopper.join()
    assert failed == [] and acknowledged == total
    assert sorted(Counter(read_all(cluster, "handover", 3, total)).values()) == [1] * total


def test_a_former_leader_truncates_its_divergent_tail_when_it_rejoins(cluster: Cluster) -> None:
    create(cluster, "diverge")
    old = leader_of(cluster, "diverge")
    others = [b for b in cluster.brokers if b != old]
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(10):
        producer.produce("diverge", f"shared-{i}".encode())
    assert producer.flush(30) == 0
    # The followers pause: the leader takes acks=1 writes they never see (its divergent tail) ...
    for b in others:
        os.kill(cluster.brokers[b].pid, signal.SIGSTOP)
    # A fetch a follower had parked at the leader is answered (empty) within replica.fetch.wait.max.ms (500 ms):
    # after that nothing more reaches the paused followers, not even into their sockets.
    time.sleep(1.0)
    tail = Producer({"bootstrap.servers": cluster.brokers[old].bootstrap, "acks": "1"})
    for i in range(5):
        tail.produce("diverge", f"divergent-{i}".encode())
    assert tail.flush(10) == 0
    # ... and dies before they do.
    cluster.brokers[old].kill()
    for b in others:
        os.kill(cluster.brokers[b].pid, signal.SIGCONT)
    cluster.wait_for(lambda md: md.topics["diverge"].partitions[0].leader in others, "a new leader", timeout_s=30)
    producer = Producer({"bootstrap.servers": cluster.live_bootstrap(), "acks": "all"})
    for i in range(3):
        producer.produce("diverge", f"new-leader-{i}".encode())
    assert producer.flush(30) == 0
    cluster.brokers[old].start()
    cluster.wait_for(lambda md: old in md.topics["diverge"].partitions[0].isrs, f"broker {old} in sync", timeout_s=60)
    # Only the former leader remains: what it serves now is what the cluster acknowledged, without its old tail.
    for b in others:
        cluster.brokers[b].kill()
    cluster.wait_for(lambda md: md.topics["diverge"].partitions[0].leader == old, f"broker {old} leads", timeout_s=30)
    expected = [f"shared-{i}".encode() for i in range(10)] + [f"new-leader-{i}".encode() for i in range(3)]
    assert read_all(cluster, "diverge", 1, len(expected)) == expected


def stand_in_registration(cluster: Cluster, broker_id: int, value: bytes) -> Callable[[], None]:
    """Register ``broker_id`` in etcd as a new incarnation (a new lease) with no process behind it, as a restarted
    broker registers before its first fetch; returns the function that ends it (revokes the lease)."""
    connect = parse_etcd_connect(cluster.etcd.endpoint + "/oncelog")

    async def register() -> int:
        async with EtcdClient(connect.endpoints) as client:
            lease = await client.grant_lease(60)
            await client.put(Layout(connect).broker(broker_id), value, lease=lease.id)
            return lease.id

    async def revoke(lease_id: int) -> None:
        async with EtcdClient(connect.endpoints) as client:
            await client.revoke_lease(lease_id)

    lease_id = trio.run(register)
    return lambda: trio.run(revoke, lease_id)


def registration_of(cluster: Cluster, broker_id: int) -> bytes:
    connect = parse_etcd_connect(cluster.etcd.endpoint + "/oncelog")

    async def read() -> bytes:
        async with EtcdClient(connect.endpoints) as client:
            kv = await client.get(Layout(connect).broker(broker_id))
            assert kv is not None
            return kv.value

    return trio.run(read)


def test_a_wiped_broker_re_replicates_everything(cluster: Cluster) -> None:
    """KIP-903: a follower's fetch position belongs to one incarnation (registration) of the follower. A broker that
    comes back with an empty disk must not rejoin the ISR by what its previous incarnation had fetched, or losing the
    other replicas would elect it with nothing."""
    create(cluster, "wiped", partitions=3)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    for i in range(900):
        producer.produce("wiped", f"v{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    wiped = 3
    registration = registration_of(cluster, wiped)
    cluster.brokers[wiped].stop()  # its fetches while it stops are refused INELIGIBLE_REPLICA (controlled shutdown)
    for b in (1, 2):
        cluster.wait_for(lambda md: wiped not in md.brokers, f"broker {wiped} gone", via=b)
    logged = {b: cluster.brokers[b].stderr_path.stat().st_size for b in (1, 2)}
    shutil.rmtree(cluster.brokers[wiped].data_dir)
    cluster.brokers[wiped].data_dir.mkdir()
    # While it is away the leaders do not propose it again and again (only to be refused INELIGIBLE_REPLICA).
    time.sleep(3 * LAG_TIME_MS / 2 / 1000)  # three rounds of ISR maintenance
    for b, offset in logged.items():
        with open(cluster.brokers[b].stderr_path, "rb") as err:
            err.seek(offset)
            refused = [line for line in err.read().splitlines() if b"alter_isr_refused" in line]
        assert not [line for line in refused if b"INELIGIBLE_REPLICA" in line], (
            f"broker {b} proposed {wiped}: {refused}"
        )
    # Registered again but nothing fetched yet (no process at all): the leaders hold the previous incarnation's
    # positions, at the high watermark since nothing was produced meanwhile; they must not propose it.
    end_stand_in = stand_in_registration(cluster, wiped, registration)
    try:
        cluster.wait_for(lambda md: wiped in md.brokers, f"broker {wiped} registered again")
        time.sleep(3 * LAG_TIME_MS / 2 / 1000)  # three rounds of ISR maintenance
        isrs = {p: pm.isrs for p, pm in cluster.metadata().topics["wiped"].partitions.items()}
        assert all(wiped not in isr for isr in isrs.values()), isrs
    finally:
        end_stand_in()
    cluster.wait_for(lambda md: wiped not in md.brokers, f"broker {wiped}'s stand-in gone")
    cluster.brokers[wiped].start()
    cluster.wait_for(
        lambda md: all(wiped in pm.isrs for pm in md.topics["wiped"].partitions.values()),
        f"broker {wiped} re-replicated",
        timeout_s=60,
    )
    # With the others gone, the wiped broker serves every record from its new copy.
    for b in (1, 2):
        cluster.brokers[b].kill()
    cluster.wait_for(
        lambda md: all(pm.leader == wiped for pm in md.topics["wiped"].partitions.values()), "broker 3 leads"
    )
    assert sorted(read_all(cluster, "wiped", 3, 900)) == sorted(f"v{i}".encode() for i in range(900))


def test_a_produce_to_a_follower_names_the_leader(healthy_cluster: Cluster) -> None:
    """KIP-951: Produce v10's NOT_LEADER_OR_FOLLOWER carries the current leader and its endpoint, which librdkafka
    uses to retry there without a Metadata round trip first."""
    create(healthy_cluster, "kip951")
    state = healthy_cluster.metadata().topics["kip951"].partitions[0]
    follower = next(b for b in healthy_cluster.brokers if b != state.leader)

    async def produce_to_follower() -> object:
        async with anyio.create_task_group() as tg:
            connection = BrokerConnection("127.0.0.1", healthy_cluster.brokers[follower].port)
            await connection.open(tg)
            try:
                body = {
                    "transactional_id": None,
                    "acks": -1,
                    "timeout_ms": 5000,
                    "topic_data": [{"name": "kip951", "partition_data": [{"index": 0, "records": None}]}],
                }
                return await connection.request(ApiKey.PRODUCE, body, version=10)
            finally:
                await connection.aclose()

    response = anyio.run(produce_to_follower)
    answer = response.responses[0].partition_responses[0]
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert answer.current_leader.leader_id == state.leader
    assert answer.current_leader.leader_epoch >= 0
    endpoints = {e.node_id: e.port for e in response.node_endpoints}
    assert endpoints == {state.leader: healthy_cluster.brokers[state.leader].port}
