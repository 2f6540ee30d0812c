"""What a replication round costs as the followed partitions grow, with follower fetch sessions (KIP-227) and
without (``max.incremental.fetch.session.cache.slots=0``), measured in the same run (not part of CI).

    .venv/bin/python bench/replication_rounds.py [--idle 0,200,1000] [--produces 200]

Three brokers in this process (``tests/support/replication_cluster.py``: real listeners on loopback, real logs,
no etcd) replicate one partition led by broker 1, which also leads ``--idle`` partitions that nothing writes to,
all followed by brokers 2 and 3. A client sends ``--produces`` acks=all Produce requests of 100 records of 100 B,
one at a time: each is answered after both followers fetched it and fetched again, so each costs one follower round
per follower. Reported: this process's CPU per produce (leader, both followers and the client), wall time per
produce, and follower rounds per produce (1.00 when each produce took exactly one round).

    .venv/bin/python bench/replication_rounds.py --processes [--idle 10,1000] [--produces 1000]

The same on real processes, beside Apache Kafka: oncelog's cluster (etcd and three broker processes) and Kafka's
three-node KRaft cluster (every node fsyncing each append, as in C1 and C5), each with a topic of ``--idle``
partitions at replication factor 3 that nothing writes to (spread over the three brokers, so each follows two
thirds of them) and one written partition at factor 3. After 10 s of warm-up (the JVM's compilation), a stock
client (librdkafka, acks=all) sends ``--produces`` records one at a time. Reported: the cluster's CPU per produce
(every broker, and etcd), wall time per produce, and the cluster's CPU at rest afterwards (5 s, share of a core).
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
from pathlib import Path

import structlog
import trio
from confluent_kafka import Producer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import cluster_bench
from oncelog.broker.controller.partition_change import PartitionState
from oncelog.client.connection import BrokerConnection
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import SimpleRecord, encode_batch
from support.replication_cluster import ReplicationCluster

TOPIC = "replicated"
IDLE_TOPIC = "idle"
VALUE = b"x" * 100
RECORDS_PER_PRODUCE = 100
WARM_UP = 30
LED_BY_1 = PartitionState(replicas=(1, 2, 3), isr=(1, 2, 3), leader=1, leader_epoch=0, partition_epoch=0)


async def measure(idle: int, produces: int, sessions: bool) -> tuple[float, float, float]:
    """(CPU us per produce, wall us per produce, follower rounds per produce)."""
    slots = "1000" if sessions else "0"
    with tempfile.TemporaryDirectory() as tmp:
        async with trio.open_nursery() as nursery:
            cluster = ReplicationCluster(
                nursery, Path(tmp), [1, 2, 3], {"max.incremental.fetch.session.cache.slots": slots}
            )
            for node_id in (1, 2, 3):
                await cluster.start(node_id)
            await cluster.create_topic(TOPIC, 1, {"min.insync.replicas": "3"})
            cluster.apply(TOPIC, 0, LED_BY_1)
            if idle:
                await cluster.create_topic(IDLE_TOPIC, idle)
                for index in range(idle):
                    cluster.apply(IDLE_TOPIC, index, LED_BY_1)
            records = encode_batch([SimpleRecord(None, VALUE, []) for _ in range(RECORDS_PER_PRODUCE)])
            body = {
                "transactional_id": None,
                "acks": -1,
                "timeout_ms": 30000,
                "topic_data": [{"name": TOPIC, "partition_data": [{"index": 0, "records": records}]}],
            }
            port = cluster.members[1].port
            assert port is not None
            async with trio.open_nursery() as connection_tasks:
                connection = BrokerConnection("127.0.0.1", port, node_id=1, client_id="rounds")
                await connection.open(connection_tasks)

                async def produce() -> None:
                    answer = await connection.request(ApiKey.PRODUCE, body, version=9)
                    error = answer.responses[0].partition_responses[0].error_code
                    assert error == ErrorCode.NONE, ErrorCode(error)

                for _ in range(WARM_UP):
                    await produce()
                fetcher = cluster.node(2).replica_fetchers.fetchers[1]  # type: ignore[union-attr]
                rounds = fetcher.rounds
                wall, cpu = time.perf_counter(), time.process_time()
                for _ in range(produces):
                    await produce()
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                rounds = fetcher.rounds - rounds
                await connection.aclose()
            assert len(cluster.node(1).fetch_sessions) == (2 if sessions else 0)
            await cluster.stop_all()
    return 1e6 * cpu / produces, 1e6 * wall / produces, rounds / produces


PROCESS_WARM_UP_S = 10.0
REST_S = 5.0


def measure_processes(idle: int, produces: int, *, kafka: bool) -> tuple[float, float, float]:
    """(cluster CPU us per produce, wall us per produce, cluster CPU at rest as a share of a core) on Kafka's
    cluster when ``kafka``, else on oncelog's; see the module docstring."""
    make = cluster_bench._kafka_cluster if kafka else cluster_bench._oncelog_cluster
    with make() as cluster:
        if idle:
            cluster_bench._create(cluster, IDLE_TOPIC, idle, 3)
        cluster_bench._create(cluster, TOPIC, 1, 3)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})

        def produce() -> None:
            producer.produce(TOPIC, VALUE, partition=0)
            assert producer.flush(30) == 0

        warm_until = time.monotonic() + PROCESS_WARM_UP_S
        while time.monotonic() < warm_until:
            produce()
        cpu, wall = sum(cluster.cpu_seconds().values()), time.perf_counter()
        for _ in range(produces):
            produce()
        wall, cpu = time.perf_counter() - wall, sum(cluster.cpu_seconds().values()) - cpu
        at_rest = sum(cluster.cpu_seconds().values())
        time.sleep(REST_S)
        at_rest = sum(cluster.cpu_seconds().values()) - at_rest
    return 1e6 * cpu / produces, 1e6 * wall / produces, at_rest / REST_S


def main() -> int:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", default="0,200,1000", help="comma list of idle partitions followed")
    parser.add_argument("--produces", type=int, default=200)
    parser.add_argument("--processes", action="store_true", help="real processes, oncelog's and Kafka's clusters")
    args = parser.parse_args()
    if args.processes:
        print(f"{'idle':>6} {'cluster':>8} {'CPU us/produce':>15} {'wall us/produce':>16} {'CPU at rest':>12}")
        for idle in (int(n) for n in args.idle.split(",")):
            for kafka in (False, True):
                cpu, wall, at_rest = measure_processes(idle, args.produces, kafka=kafka)
                name = "Kafka" if kafka else "oncelog"
                print(f"{idle:>6} {name:>8} {cpu:>15,.0f} {wall:>16,.0f} {at_rest:>11.1%}", flush=True)
        return 0
    print(f"{'idle':>6} {'sessions':>9} {'CPU us/produce':>15} {'wall us/produce':>16} {'rounds/produce':>15}")
    for idle in (int(n) for n in args.idle.split(",")):
        for sessions in (False, True):
            cpu, wall, rounds = trio.run(measure, idle, args.produces, sessions)
            print(
                f"{idle:>6} {'on' if sessions else 'off':>9} {cpu:>15,.0f} {wall:>16,.0f} {rounds:>15.2f}", flush=True
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
