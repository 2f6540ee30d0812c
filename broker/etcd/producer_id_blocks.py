"""Cluster-wide producer id blocks in etcd: no id is handed out twice by any broker, across failovers.

One key holds the end of the last block claimed (Kafka's ``/latest_producer_id_block`` in the ZooKeeper era, its
``ProducerIdsRecord`` in KRaft). A broker claims the next block with a compare-and-swap on that key's revision and
retries when another broker claimed one first; a block claimed and never used is skipped, never reused.
"""

from __future__ import annotations

import json

from .client import EtcdClient, KeyValue

#: Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
PRODUCER_ID_BLOCK_SIZE = 1000


async def claim_block(client: EtcdClient, key: str, *, broker_id: int, size: int = PRODUCER_ID_BLOCK_SIZE) -> range:
    """Ids ``[start, start + size)`` reserved for ``broker_id`` alone."""

    def next_block(current: KeyValue | None) -> bytes:
        start = json.loads(current.value)["block_end"] if current else 0
        return json.dumps({"block_end": start + size, "broker_id": broker_id}).encode()

    stored, _ = await client.update(key, next_block)
    end = json.loads(stored)["block_end"]
    return range(end - size, end)
