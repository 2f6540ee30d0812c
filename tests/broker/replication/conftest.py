"""``make_cluster``: in-process replicating brokers (``support.replication_cluster``) for the tests here."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest
import trio
from support.replication_cluster import ReplicationCluster


@pytest.fixture
async def make_cluster(nursery: trio.Nursery, tmp_path) -> AsyncIterator[Callable]:
    """``await make_cluster(node_ids, **properties)`` (``replica_fetch_wait_max_ms="1"`` sets
    ``replica.fetch.wait.max.ms``); every cluster made stops with the test."""
    clusters: list[ReplicationCluster] = []

    async def make(node_ids, **properties: str) -> ReplicationCluster:
        cluster = ReplicationCluster(
            nursery, tmp_path, node_ids, {k.replace("_", "."): v for k, v in properties.items()}
        )
        clusters.append(cluster)
        for node_id in node_ids:
            await cluster.start(node_id)
        return cluster

    yield make
    for cluster in clusters:
        await cluster.stop_all()
