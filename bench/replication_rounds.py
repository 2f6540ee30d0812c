"""What a replication round costs as the followed partitions grow, with follower fetch sessions (KIP-227) and
without (``max.incremental.fetch.session.cache.slots=0``), measured in the same run (not part of CI).

    .venv/bin/python bench/replication_rounds.py [--idle 0,200,1000] [--produces 200]

Three brokers in this process (``tests/support/replication_cluster.py``: real listeners on loopback, real logs,
no etcd) replicate one partition led by broker 1, which also leads ``--idle`` partitions that nothing writes to,
all followed by brokers 2 and 3. A client sends ``--produces`` acks=all Produce requests of 100 records of 100 B,
one at a time: each is answered after both followers fetched it and fetched again, so each costs one follower round
per follower. Reported: this process's CPU per produce (leader, both followers and the client), wall time per
produce, and follower rounds per produce (1.00 when each produce took exactly one round).
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

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


def main() -> int:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--idle", default="0,200,1000", help="comma list of idle partitions followed")
    parser.add_argument("--produces", type=int, default=200)
    args = parser.parse_args()
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
