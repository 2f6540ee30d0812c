"""Creating, growing and deleting topics in etcd, as CreateTopics, CreatePartitions and DeleteTopics need it.

A creation places the replicas over the live brokers (``controller.placement``), writes every partition's first
state under a new topic id, then the topic record last: the topic exists from the moment its record does, whole.
Each write is guarded by the record's absence, so of two brokers creating one name at once exactly one succeeds and
the other answers TOPIC_ALREADY_EXISTS; partition keys a lost or crashed creation left behind belong to no record and
are ignored (``layout``). etcd limits a transaction to 128 operations (``--max-txn-ops``), so partitions are written
in chunks of that size.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping

from oncelog.broker.controller.partition_change import PartitionState
from oncelog.broker.controller.placement import assign_replicas
from oncelog.broker.controller.refused import Refused
from oncelog.broker.metadata import NON_POSITIVE_PARTITIONS
from oncelog.protocol.errors import ErrorCode

from .client import Compare, Delete, EtcdClient, Put
from .layout import Layout, TopicRecord

#: etcd's default ``--max-txn-ops``: the most operations one transaction may hold.
ETCD_MAX_TXN_OPS = 128


def new_topic_id() -> str:
    """A random topic id in Kafka's text form of a Uuid (URL-safe base64 of 16 bytes, no padding)."""
    return base64.urlsafe_b64encode(os.urandom(16)).rstrip(b"=").decode()


async def create_topic(
    client: EtcdClient,
    layout: Layout,
    *,
    name: str,
    partitions: int,
    replication_factor: int,
    live_brokers: Mapping[int, str | None],
    configs: Mapping[str, str] | None = None,
) -> TopicRecord:
    """Create ``name`` over ``live_brokers`` (id -> rack); Refused with TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS or
    INVALID_REPLICATION_FACTOR."""
    if partitions <= 0:
        raise Refused(ErrorCode.INVALID_PARTITIONS, NON_POSITIVE_PARTITIONS)
    assignment = assign_replicas(live_brokers, partitions, replication_factor)
    record = TopicRecord(name, new_topic_id(), partitions, dict(configs or {}))
    states = {index: PartitionState.new(replicas, live_brokers) for index, replicas in assignment.items()}
    if not await _write(client, layout, record, states, Compare.absent(layout.topic(name))):
        await client.delete(layout.topic_partitions(record.topic_id), prefix=True)  # ours, under our new id
        raise Refused(ErrorCode.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
    return record


async def add_partitions(
    client: EtcdClient, layout: Layout, *, name: str, total: int, live_brokers: Mapping[int, str | None]
) -> TopicRecord:
    """Grow ``name`` to ``total`` partitions (CreatePartitions), placing the new ones as Kafka does."""
    current = await client.get(layout.topic(name))
    if current is None:
        raise Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    record = TopicRecord.from_json(current.value)
    if total == record.partitions:
        raise Refused(ErrorCode.INVALID_PARTITIONS, f"Topic already has {total} partitions.")
    if total < record.partitions:
        raise Refused(
            ErrorCode.INVALID_PARTITIONS,
            f"Topic currently has {record.partitions} partitions, which is higher than the requested {total}.",
        )
    factor = len(PartitionState.from_json((await client.get(layout.partition(record.topic_id, 0))).value).replicas)
    assignment = assign_replicas(live_brokers, total - record.partitions, factor, first_partition=record.partitions)
    states = {index: PartitionState.new(replicas, live_brokers) for index, replicas in assignment.items()}
    grown = TopicRecord(record.name, record.topic_id, total, record.configs)
    if not await _write(client, layout, grown, states, Compare.unchanged(current)):
        raise Refused(ErrorCode.REASSIGNMENT_IN_PROGRESS, f"Topic '{name}' changed meanwhile; try again.")
    return grown


async def delete_topic(client: EtcdClient, layout: Layout, name: str) -> TopicRecord:
    """Remove the record and every partition state of ``name`` in one transaction."""
    current = await client.get(layout.topic(name))
    if current is None:
        raise Refused(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"Topic '{name}' does not exist.")
    record = TopicRecord.from_json(current.value)
    removal = [Delete(layout.topic(name)), Delete(layout.topic_partitions(record.topic_id), prefix=True)]
    if not (await client.txn([Compare.unchanged(current)], removal)).succeeded:
        return await delete_topic(client, layout, name)  # changed meanwhile (grown, configs): delete what is there
    return record


async def _write(
    client: EtcdClient, layout: Layout, record: TopicRecord, states: dict[int, PartitionState], guard: Compare
) -> bool:
    """Write ``states`` then ``record``, each transaction guarded by ``guard``; False when the guard failed.

    Up to 127 partitions go in the record's own transaction (all or nothing). More are written in chunks first, so a
    failure can leave partition keys behind; under a new topic id they belong to nothing, and for new partitions of an
    existing topic they are overwritten by the next successful attempt."""
    puts = [Put(layout.partition(record.topic_id, index), state.to_json()) for index, state in states.items()]
    while len(puts) >= ETCD_MAX_TXN_OPS:
        chunk, puts = puts[:ETCD_MAX_TXN_OPS], puts[ETCD_MAX_TXN_OPS:]
        if not (await client.txn([guard], chunk)).succeeded:
            return False
    final = [*puts, Put(layout.topic(record.name), record.to_json())]
    return (await client.txn([guard], final)).succeeded
