"""After Kafka's ``transactions_test.py``, on three brokers and etcd (``support/bounces.py``): transactional copiers
of confluent-kafka and the bundled client copy input topics (replication factor 3, min.insync.replicas
2) to output topics while a copier is SIGKILLed and a broker is SIGKILLed and restarted; each output equals its
input, once, a concurrent read_committed reader never sees a record the final output does not hold at that offset,
the restarted broker's first Metadata answer names the cluster's id and brokers, and no producer id is handed
out twice (the restarted broker claims a new block). The long form
(``tests/torture/bounce_torture.py``) bounces every broker, hard and clean, many times, with kafka-python's copier
too; kafka-python's transactional copier through copier and broker SIGKILLs runs in CI in
``tests/interop/test_copier.py`` (one broker), which keeps this short form to two clients (about 15 s less)."""

from __future__ import annotations

import time
from pathlib import Path

from support.bounces import run_bounces
from support.cluster import Cluster
from support.wire import WireClient

SETTINGS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


def test_copiers_of_two_clients_copy_exactly_once_through_rolling_bounces(tmp_path: Path) -> None:
    started = time.monotonic()
    with Cluster(3, SETTINGS) as cluster:
        ids = producer_ids(cluster)
        result = run_bounces(
            cluster,
            ["confluent", "oncelog"],
            records=2000,
            bounces=["copier", "hard:1"],
            log_dir=tmp_path,
            batch=200,
            log=lambda line: print(f"{time.monotonic() - started:6.1f}s {line}", flush=True),
        )
        ids += producer_ids(cluster)  # broker 1 restarted: a new block, never one handed out before
        assert len(set(ids)) == len(ids), sorted(ids)
    print(result.summary())
    assert result.problems() == [], result.summary()


def producer_ids(cluster: Cluster, per_broker: int = 20) -> list[int]:
    """Idempotent producer ids handed out by each broker (InitProducerId without a transactional id)."""
    ids: list[int] = []
    for broker in cluster.brokers.values():
        with WireClient(broker.bootstrap) as client:
            wanted = len(ids) + per_broker
            while len(ids) < wanted:
                error, producer_id, _ = client.init_producer_id()
                if error == 0:
                    ids.append(producer_id)
                else:
                    time.sleep(0.1)  # a block being claimed (COORDINATOR_LOAD_IN_PROGRESS)
    return ids
