"""Replication between real brokers in one trio test, leadership handed in by hand (no etcd): followers fetch with
their replica id and hold the leader's batches byte for byte; the high watermark waits for the ISR; acks=all with
min.insync.replicas; the ISR shrinks after replica.lag.time.max.ms and grows back; a leader change truncates the old
leader's divergent tail and the new leader deduplicates an idempotent producer's retry; non-leaders refuse."""

from __future__ import annotations

import shutil
from collections.abc import Callable

import pytest
import trio
from oncelog.broker.controller.partition_change import PartitionState
from oncelog.broker.txn.markers import TxnMarker, append_markers, wait_markers_durable
from oncelog.client.producer import Producer
from oncelog.protocol import ApiKey, ErrorCode
from support.confluent_io import produce_all
from support.dataset import make_records
from support.replication_cluster import ReplicationCluster

from broker.conftest import WireClient
from broker.helpers import batch, fetch_body, list_offsets_body, produce_body

TOPIC = "replicated"
WAIT_S = 20


async def connect(cluster: ReplicationCluster, node_id: int) -> WireClient:
    port = cluster.members[node_id].port
    assert port is not None
    return WireClient(await trio.open_tcp_stream("127.0.0.1", port))


async def produce(client: WireClient, records: bytes, *, acks: int = -1, timeout_ms: int = 30000):
    body = produce_body(TOPIC, 0, records, acks=acks)
    body["timeout_ms"] = timeout_ms
    response = await client.request(ApiKey.PRODUCE, 9, body)
    return response.responses[0].partition_responses[0]


def log_bytes(cluster: ReplicationCluster, node_id: int) -> bytes:
    partition_log = cluster.node(node_id).logs.get(TOPIC, 0)
    assert partition_log is not None
    return partition_log.read(0, 1 << 30, min_one_batch=True)


def end_offset(cluster: ReplicationCluster, node_id: int) -> int:
    partition_log = cluster.node(node_id).logs.get(TOPIC, 0)
    assert partition_log is not None
    return partition_log.log_end_offset


def high_watermark(cluster: ReplicationCluster, node_id: int) -> int:
    partition_log = cluster.node(node_id).logs.get(TOPIC, 0)
    assert partition_log is not None
    return partition_log.high_watermark


async def until(condition: Callable[[], bool], timeout_s: float = WAIT_S) -> None:
    with trio.fail_after(timeout_s):
        while not condition():
            await trio.sleep(0.02)


def led_by(leader: int, replicas=(1, 2, 3), *, isr=None, leader_epoch=0, partition_epoch=0) -> PartitionState:
    return PartitionState(
        replicas=tuple(replicas),
        isr=tuple(isr if isr is not None else replicas),
        leader=leader,
        leader_epoch=leader_epoch,
        partition_epoch=partition_epoch,
    )


async def test_followers_hold_the_leaders_batches_at_the_same_offsets(make_cluster) -> None:
    cluster = await make_cluster([1, 2, 3])
    await cluster.create_topic(TOPIC, configs={"min.insync.replicas": "2"})
    cluster.apply(TOPIC, 0, led_by(1))
    client = await connect(cluster, 1)
    for i in range(5):
        answer = await produce(client, batch([b"v%d-%d" % (i, j) for j in range(3)]))
        assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 3 * i)
        # acks=all answered: every ISR member holds the batch, so the high watermark passed it.
        assert min(end_offset(cluster, n) for n in (1, 2, 3)) >= 3 * i + 3
    await until(lambda: all(high_watermark(cluster, n) == 15 for n in (1, 2, 3)))
    leader = log_bytes(cluster, 1)
    assert len(leader) > 0
    assert log_bytes(cluster, 2) == leader
    assert log_bytes(cluster, 3) == leader
    assert cluster.state(TOPIC, 0).isr == (1, 2, 3)


async def test_a_marker_reaches_parked_followers_and_is_acknowledged_without_a_fetch_timer(make_cluster) -> None:
    """A control batch (a coordinator's append, not a client's) wakes the followers' parked fetches, and each
    follower's next fetch, sent once the marker is durable there, moves the leader's high watermark past it: the
    marker's replication wait ends on those events, not on ``replica.fetch.wait.max.ms`` (set far beyond the test's
    own limit, so a fetch left parked would fail it)."""
    cluster = await make_cluster([1, 2, 3], replica_fetch_wait_max_ms="120000")
    await cluster.create_topic(TOPIC)
    cluster.apply(TOPIC, 0, led_by(1))
    client = await connect(cluster, 1)
    assert (await produce(client, batch([b"before"]))).error_code == ErrorCode.NONE
    # acks=all answered: both followers fetched again after the batch, and that fetch is parked at the leader now.
    fetchers = {n: cluster.node(n).replica_fetchers.fetchers[1] for n in (2, 3)}
    rounds = {n: fetcher.rounds for n, fetcher in fetchers.items()}

    leader = cluster.node(1).replicas
    marker = TxnMarker(4242, 0, 0, True, frozenset([(TOPIC, 0)]))
    appended = append_markers(leader, marker, [(TOPIC, 0)], listener=None)
    assert appended[(TOPIC, 0)][0] == ErrorCode.NONE
    with trio.fail_after(WAIT_S):
        assert await wait_markers_durable(leader, appended) == {(TOPIC, 0): ErrorCode.NONE}
    assert high_watermark(cluster, 1) == end_offset(cluster, 1) == 2
    assert all(end_offset(cluster, n) == 2 for n in (2, 3))
    # One answer per follower carried the marker: the parked fetch was woken by the append, not timed out empty.
    assert {n: fetcher.rounds - rounds[n] for n, fetcher in fetchers.items()} == {2: 1, 3: 1}


async def test_non_leaders_refuse_clients_and_followers(make_cluster) -> None:
    cluster = await make_cluster([1, 2])
    await cluster.create_topic(TOPIC)
    cluster.apply(TOPIC, 0, led_by(1, (1, 2)))
    follower = await connect(cluster, 2)
    answer = await produce(follower, batch([b"x"]))
    assert answer.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    fetched = await follower.request(ApiKey.FETCH, 12, fetch_body(TOPIC, 0, 0))
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    body = fetch_body(TOPIC, 0, 0)
    body["replica_id"] = 1
    fetched = await follower.request(ApiKey.FETCH, 12, body)
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    listed = await follower.request(ApiKey.LIST_OFFSETS, 3, list_offsets_body(TOPIC, 0, -1))
    assert listed.topics[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    # A broker that is not a replica of the partition is refused by the leader too.
    leader = await connect(cluster, 1)
    body["replica_id"] = 7
    fetched = await leader.request(ApiKey.FETCH, 12, body)
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_acks_all_waits_for_the_isr_which_shrinks_and_grows_back(make_cluster) -> None:
    cluster = await make_cluster([1, 2], min_insync_replicas="2", replica_lag_time_max_ms="1500")
    await cluster.create_topic(TOPIC)
    cluster.apply(TOPIC, 0, led_by(1, (1, 2)))
    client = await connect(cluster, 1)
    assert (await produce(client, batch([b"a"]))).error_code == ErrorCode.NONE
    await cluster.stop(2)

    # The follower is gone but still in the ISR: the high watermark does not pass what it holds.
    answer = await produce(client, batch([b"b"]), timeout_ms=300)
    assert answer.error_code == ErrorCode.REQUEST_TIMED_OUT
    assert end_offset(cluster, 1) == 2
    assert high_watermark(cluster, 1) == 1

    # After replica.lag.time.max.ms the leader drops it through the controller; the waiting acks=all is answered
    # NOT_ENOUGH_REPLICAS_AFTER_APPEND, the next one refused before appending.
    answer = await produce(client, batch([b"c"]))
    assert answer.error_code == ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
    assert cluster.state(TOPIC, 0).isr == (1,)
    assert high_watermark(cluster, 1) == 3
    answer = await produce(client, batch([b"d"]))
    assert answer.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert end_offset(cluster, 1) == 3
    # acks=1 does not wait for followers.
    assert (await produce(client, batch([b"e"]), acks=1)).error_code == ErrorCode.NONE

    # The follower comes back, catches up and is added back; acks=all works again.
    await cluster.start(2)
    await until(lambda: cluster.state(TOPIC, 0).isr == (1, 2))
    answer = await produce(client, batch([b"f"]))
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 4)
    assert log_bytes(cluster, 2)[: len(log_bytes(cluster, 1))] == log_bytes(cluster, 1)


@pytest.mark.parametrize("restarted", [False, True], ids=["demoted", "restarted"])
async def test_failover_truncates_the_old_leaders_tail_and_dedupes_a_retry(make_cluster, restarted: bool) -> None:
    """``restarted``: the old leader restarts before it learns of the new leader, so its high watermark is its log
    end (not persisted) and only OffsetForLeaderEpoch finds where its log diverges (KIP-101)."""
    cluster = await make_cluster([1, 2])
    await cluster.create_topic(TOPIC)
    cluster.apply(TOPIC, 0, led_by(1, (1, 2)))
    old = await connect(cluster, 1)
    init = await old.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
    pid, epoch = init.producer_id, init.producer_epoch
    acknowledged = batch([b"acked-0", b"acked-1"], producer_id=pid, producer_epoch=epoch, base_sequence=0)
    assert (await produce(old, acknowledged)).error_code == ErrorCode.NONE

    await until(lambda: high_watermark(cluster, 2) == 2)

    # Leadership moves to broker 2 (leader epoch 1) while broker 1 has not heard yet: it still takes records as
    # leader, which only it holds (acks=1: nobody waits for the ISR).
    new_state = led_by(2, (1, 2), leader_epoch=1, partition_epoch=cluster.state(TOPIC, 0).partition_epoch + 1)
    cluster.apply(TOPIC, 0, new_state, order=[2])
    assert (await produce(old, batch([b"divergent"]), acks=1)).error_code == ErrorCode.NONE
    assert end_offset(cluster, 1) == 3
    # Now broker 1 learns it follows broker 2 and cuts its divergent tail.
    if restarted:
        await cluster.stop(1)
        await cluster.start(1)
        old = await connect(cluster, 1)
    else:
        cluster.apply(TOPIC, 0, new_state, order=[1])
    new = await connect(cluster, 2)

    # The producer's retry of its acknowledged batch: the new leader knows it from the replicated batches.
    retried = await produce(new, acknowledged)
    assert (retried.error_code, retried.base_offset) == (ErrorCode.NONE, 0)
    more = batch([b"after"], producer_id=pid, producer_epoch=epoch, base_sequence=2)
    answer = await produce(new, more)
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 2)
    await until(lambda: end_offset(cluster, 1) == 3 and log_bytes(cluster, 1) == log_bytes(cluster, 2))
    assert b"divergent" not in log_bytes(cluster, 1)
    assert b"acked-1" in log_bytes(cluster, 1)

    # The old leader now refuses clients.
    assert (await produce(old, batch([b"late"]))).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_stock_and_bundled_producers_replicate_with_acks_all(make_cluster) -> None:
    cluster = await make_cluster([1, 2, 3])
    await cluster.create_topic(TOPIC, configs={"min.insync.replicas": "3"})
    cluster.apply(TOPIC, 0, led_by(1))
    bootstrap = f"127.0.0.1:{cluster.members[1].port}"
    records = make_records(300, seed=24)
    delivered = await trio.to_thread.run_sync(
        lambda: produce_all(bootstrap, TOPIC, records, **{"enable.idempotence": True, "partitioner": "consistent"})
    )
    assert sorted(d.offset for d in delivered) == list(range(300))
    async with Producer(bootstrap, acks=-1, enable_idempotence=True) as producer:
        for i in range(50):
            await producer.send(TOPIC, b"bundled-%d" % i, partition=0)
        await producer.flush()
    # Every acknowledged record is on every ISR member (min.insync.replicas = all three), byte for byte.
    assert all(end_offset(cluster, n) >= 350 for n in (1, 2, 3))
    await until(lambda: all(high_watermark(cluster, n) == 350 for n in (1, 2, 3)))
    assert log_bytes(cluster, 2) == log_bytes(cluster, 1)
    assert log_bytes(cluster, 3) == log_bytes(cluster, 1)


async def test_a_wiped_follower_starts_at_the_leaders_log_start(make_cluster, tmp_path) -> None:
    cluster = await make_cluster([1, 2])
    await cluster.create_topic(TOPIC)
    cluster.apply(TOPIC, 0, led_by(1, (1, 2)))
    client = await connect(cluster, 1)
    for i in range(3):
        assert (await produce(client, batch([b"r%d" % i]))).error_code == ErrorCode.NONE
    await cluster.stop(2)
    deleted = cluster.node(1).replicas.delete_records({(TOPIC, 0): 2})
    assert deleted[(TOPIC, 0)].low_watermark == 2
    shutil.rmtree(cluster.members[2].data_dir)

    # The empty follower's first fetch (offset 0) is below the leader's log start: it starts over at 2.
    await cluster.start(2)
    assert (await produce(client, batch([b"r3"]))).error_code == ErrorCode.NONE
    follower = cluster.node(2).logs.get(TOPIC, 0)
    assert follower is not None
    assert (follower.log_start_offset, follower.log_end_offset) == (2, 4)
    leader = cluster.node(1).logs.get(TOPIC, 0)
    assert leader is not None
    assert follower.read(2, 1 << 20, min_one_batch=True) == leader.read(2, 1 << 20, min_one_batch=True)


async def test_a_restarted_follower_takes_the_leaders_high_watermark(make_cluster) -> None:
    cluster = await make_cluster([1, 2, 3])
    await cluster.create_topic(TOPIC)
    cluster.apply(TOPIC, 0, led_by(1))
    client = await connect(cluster, 1)
    assert (await produce(client, batch([b"committed"]))).error_code == ErrorCode.NONE
    await cluster.stop(3)  # still in the ISR: the high watermark stays at 1 from now on
    assert (await produce(client, batch([b"uncommitted"]), acks=1)).error_code == ErrorCode.NONE
    await until(lambda: end_offset(cluster, 2) == 2)
    assert high_watermark(cluster, 1) == high_watermark(cluster, 2) == 1

    # Restarted, broker 2 opens its log with the high watermark at its end (2); the leader's answer brings it to 1.
    await cluster.stop(2)
    await cluster.start(2)
    await until(lambda: cluster.node(2).replica_fetchers.fetchers[1].rounds >= 1)
    assert end_offset(cluster, 2) == 2
    assert high_watermark(cluster, 2) == high_watermark(cluster, 1) == 1


async def test_records_deleted_on_the_leader_go_on_the_followers_too(make_cluster) -> None:
    cluster = await make_cluster([1, 2])
    await cluster.create_topic(TOPIC)
    cluster.apply(TOPIC, 0, led_by(1, (1, 2)))
    client = await connect(cluster, 1)
    for i in range(3):
        assert (await produce(client, batch([b"r%d" % i]))).error_code == ErrorCode.NONE
    assert cluster.node(1).replicas.delete_records({(TOPIC, 0): 2})[(TOPIC, 0)].low_watermark == 2
    assert (await produce(client, batch([b"r3"]))).error_code == ErrorCode.NONE
    follower = cluster.node(2).logs.get(TOPIC, 0)
    assert follower is not None
    await until(lambda: follower.log_start_offset == 2)


async def test_partitions_led_by_different_brokers_and_moved_between_them(make_cluster) -> None:
    cluster = await make_cluster([1, 2, 3])
    await cluster.create_topic("many", partitions=4)
    leaders = {0: 1, 1: 2, 2: 3, 3: 1}
    for partition, leader in leaders.items():
        cluster.apply("many", partition, led_by(leader))
    clients = {n: await connect(cluster, n) for n in (1, 2, 3)}

    async def produce_to(partition: int, value: bytes) -> int:
        body = produce_body("many", partition, batch([value]))
        response = await clients[leaders[partition]].request(ApiKey.PRODUCE, 9, body)
        answer = response.responses[0].partition_responses[0]
        assert answer.error_code == ErrorCode.NONE, (partition, answer)
        return answer.base_offset

    def logs_equal(partition: int) -> bool:
        logs = [cluster.node(n).logs.get("many", partition) for n in (1, 2, 3)]
        contents = {x.read(0, 1 << 20, min_one_batch=True) for x in logs if x is not None}
        return len(contents) == 1

    for partition in leaders:
        assert await produce_to(partition, b"first-%d" % partition) == 0
    # One fetcher per leader on each broker, each fetching that leader's partitions.
    assert sorted(cluster.node(1).replica_fetchers.fetchers) == [2, 3]
    assert sorted(cluster.node(2).replica_fetchers.fetchers[1].partitions) == [("many", 0), ("many", 3)]

    # Partition 3 moves from broker 1 to broker 2 (epoch 1): broker 1 now fetches it from broker 2.
    leaders[3] = 2
    cluster.apply("many", 3, led_by(2, leader_epoch=1, partition_epoch=1))
    assert ("many", 3) in cluster.node(1).replica_fetchers.fetchers[2].partitions
    assert ("many", 3) not in cluster.node(3).replica_fetchers.fetchers[1].partitions
    for partition in leaders:
        assert await produce_to(partition, b"second-%d" % partition) == 1
    for partition in leaders:
        await until(lambda p=partition: logs_equal(p))


async def test_a_restarted_leader_starts_from_its_saved_high_watermark(make_cluster) -> None:
    cluster = await make_cluster([1, 2])
    await cluster.create_topic(TOPIC)
    cluster.apply(TOPIC, 0, led_by(1, (1, 2)))
    client = await connect(cluster, 1)
    assert (await produce(client, batch([b"committed"]))).error_code == ErrorCode.NONE
    await cluster.stop(2)  # still in the ISR: the high watermark stays at 1 from now on
    assert (await produce(client, batch([b"uncommitted"]), acks=1)).error_code == ErrorCode.NONE
    assert high_watermark(cluster, 1) == 1

    # Restarted, the leader opens its log with the high watermark at its end (2), then its first state brings back
    # the saved one: consumers do not see what the follower lacks.
    await cluster.stop(1)
    await cluster.start(1)
    assert (end_offset(cluster, 1), high_watermark(cluster, 1)) == (2, 1)
    client = await connect(cluster, 1)
    listed = await client.request(ApiKey.LIST_OFFSETS, 3, list_offsets_body(TOPIC, 0, -1))
    assert listed.topics[0].partitions[0].offset == 1
    # Alone in its ISR, it moves the high watermark to its end at once (Kafka's single-replica leader).
    cluster.apply(TOPIC, 0, led_by(1, (1, 2), isr=(1,), partition_epoch=1))
    assert high_watermark(cluster, 1) == 2


async def test_a_zombie_producer_is_fenced_by_the_new_leader(make_cluster) -> None:
    """Producer state and epochs follow the leader: the new leader knows the producer's newer epoch from the
    replicated batches, so the older incarnation's next batch is refused (INVALID_PRODUCER_EPOCH), and the newer one
    goes on at its next sequence."""
    cluster = await make_cluster([1, 2])
    await cluster.create_topic(TOPIC)
    cluster.apply(TOPIC, 0, led_by(1, (1, 2)))
    old = await connect(cluster, 1)
    init = await old.request(ApiKey.INIT_PRODUCER_ID, 1, {"transactional_id": None, "transaction_timeout_ms": 60000})
    pid = init.producer_id
    zombie_first = batch([b"zombie-0"], producer_id=pid, producer_epoch=0, base_sequence=0)
    assert (await produce(old, zombie_first)).error_code == ErrorCode.NONE
    # Its successor: the same producer id at the next epoch (an idempotent producer bumps its own epoch, KIP-360).
    successor = batch([b"new-0"], producer_id=pid, producer_epoch=1, base_sequence=0)
    assert (await produce(old, successor)).error_code == ErrorCode.NONE
    await until(lambda: high_watermark(cluster, 2) == 2)

    partition_epoch = cluster.state(TOPIC, 0).partition_epoch + 1
    cluster.apply(TOPIC, 0, led_by(2, (1, 2), leader_epoch=1, partition_epoch=partition_epoch))
    new = await connect(cluster, 2)
    zombie = await produce(new, batch([b"zombie-1"], producer_id=pid, producer_epoch=0, base_sequence=1))
    assert zombie.error_code == ErrorCode.INVALID_PRODUCER_EPOCH
    answer = await produce(new, batch([b"new-1"], producer_id=pid, producer_epoch=1, base_sequence=1))
    assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, 2)
    assert b"zombie-1" not in log_bytes(cluster, 2)
