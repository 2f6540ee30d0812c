"""Interop: kafkajs 2.2.4 (Node.js) against the broker under test.

kafkajs speaks only non-flexible versions and picks the highest version both sides name, ignoring the broker's
minimum. The tests drive it through ``kafkajs/driver.js`` (one Node process per step, JSON in and out) and check
what it did with confluent-kafka where a second opinion helps: admin (create, already exists, an illegal name,
metadata, createPartitions), plain and idempotent produce under none and gzip (the codecs kafkajs ships) with every
record field checked, key placement by its Java-compatible partitioner, a consumer group that commits and resumes,
transactions that commit and abort as read_committed and read_uncommitted readers see them, a
consume-transform-produce loop whose offsets travel in its transactions (``sendOffsets``), ``alterConfigs``
read back with ``describeConfigs``, and ``deleteTopicRecords`` followed by a consumer from the beginning.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Sequence
from dataclasses import replace

import pytest
from confluent_kafka import Consumer, TopicPartition
from support.confluent_io import consume_all, produce_all
from support.dataset import Consumed, Delivered, SampleRecord, check_roundtrip, make_records
from support.kafkajs import kafkajs
from support.txn import TxnLog, check_consumed, check_delivered, round_robin

PARTITIONS = 3


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode()


def _bytes(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def as_kafkajs_writes(records: Sequence[SampleRecord]) -> list[SampleRecord]:
    """The records with their headers in the order kafkajs writes them: it takes headers as an object, so a
    repeated name's values follow its first appearance."""
    out = []
    for rec in records:
        names = list(dict.fromkeys(name for name, _ in rec.headers))
        headers = tuple(h for name in names for h in rec.headers if h[0] == name)
        out.append(replace(rec, headers=headers))
    return out


def to_job(records: Sequence[SampleRecord], partition_of: Callable[[int], int] | None = None) -> list[dict]:
    return [
        {
            "key": _b64(rec.key),
            "value": _b64(rec.value),
            "headers": [[name, _b64(value)] for name, value in rec.headers],
            "timestamp": rec.timestamp_ms,
            **({} if partition_of is None else {"partition": partition_of(i)}),
        }
        for i, rec in enumerate(records)
    ]


def from_job(consumed: list[dict]) -> list[Consumed]:
    return [
        Consumed(
            c["partition"],
            c["offset"],
            _bytes(c["key"]),
            _bytes(c["value"]),
            tuple((name, _bytes(value)) for name, value in c["headers"]),
            c["timestamp"],
        )
        for c in consumed
    ]


def consume_kafkajs(
    bootstrap: str, topic: str, group: str, expected: int, *, read_uncommitted: bool = False
) -> list[Consumed]:
    """Every record a kafkajs group member reads from ``topic`` until ``expected`` arrived and 1 s passed."""
    result = kafkajs(
        bootstrap,
        "consume",
        topic=topic,
        groupId=group,
        expected=expected,
        readUncommitted=read_uncommitted,
        idleMs=1000,
    )
    return from_job(result["consumed"])


def committed_offsets(bootstrap: str, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def end_offsets(delivered: Sequence[Delivered]) -> dict[int, int]:
    """Each partition's log end offset after ``delivered`` (plain records, one producer)."""
    return {p: 1 + max(d.offset for d in delivered if d.partition == p) for p in range(PARTITIONS)}


def test_admin_creates_topics_and_describes_them(bootstrap: str) -> None:
    from conftest import unique_topic

    topic = unique_topic("kjs-admin")
    result = kafkajs(bootstrap, "admin", topic=topic, partitions=PARTITIONS, invalidTopic="bad/name")
    assert result["created"] is True
    assert result["createdAgain"] is False  # kafkajs's answer to TOPIC_ALREADY_EXISTS
    assert result["invalidError"] is not None and "INVALID_TOPIC_EXCEPTION" in result["invalidError"]
    assert sorted(p["partition"] for p in result["partitions"]) == list(range(PARTITIONS))
    assert len({p["leader"] for p in result["partitions"]}) == 1
    assert result["listed"] is True


def test_alter_configs_replaces_the_overrides(bootstrap: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic("kjs-configs", 1)
    wanted = {"retention.ms": "60000", "cleanup.policy": "compact,delete"}
    result = kafkajs(bootstrap, "configs", topic=topic, configs=wanted, invalid={"retention.ms": "soon"})
    assert [(r["resourceName"], r["errorCode"]) for r in result["altered"]] == [(topic, 0)]
    entries = result["entries"]
    assert {name: entries[name]["value"] for name in wanted} == wanted
    assert entries["retention.ms"]["source"] == 1  # DYNAMIC_TOPIC_CONFIG
    assert entries["max.message.bytes"]["source"] == 5  # DEFAULT_CONFIG
    assert result["invalidError"] == "INVALID_CONFIG"
    # Read back by a second client too: the failed change left the first one in place.
    from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

    admin = AdminClient({"bootstrap.servers": bootstrap})
    (future,) = admin.describe_configs([ConfigResource(ResourceType.TOPIC, topic)]).values()
    assert future.result(timeout=15)["retention.ms"].value == "60000"


def test_admin_create_partitions_grows_a_topic(bootstrap: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic("kjs-grow", 1)
    result = kafkajs(bootstrap, "partitions", topic=topic, count=PARTITIONS)
    assert result["againError"] == "INVALID_PARTITIONS"  # the same count again is no increase
    assert result["partitions"] == list(range(PARTITIONS))
    assert result["sent"] == [{"partition": PARTITIONS - 1, "offset": 0, "errorCode": 0}]
    consumed = consume_all(bootstrap, topic, PARTITIONS, 1)
    assert [(c.partition, c.offset, c.value) for c in consumed] == [(PARTITIONS - 1, 0, b"on-the-new-partition")]


def test_admin_delete_topic_records_moves_the_start(bootstrap: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic("kjs-delete-records", PARTITIONS)
    delivered = produce_all(bootstrap, topic, make_records(300, seed=740))
    ends = end_offsets(delivered)
    wanted = {0: ends[0] // 2, 1: ends[1], 2: 0}
    job = [{"partition": 0, "offset": wanted[0]}, {"partition": 1, "offset": -1}, {"partition": 2, "offset": 0}]
    result = kafkajs(bootstrap, "records", topic=topic, partitions=job, beyond=ends[0] + 1)
    assert result["offsets"] == [{"partition": p, "low": wanted[p], "high": ends[p]} for p in range(PARTITIONS)]
    assert result["beyondError"] == "OFFSET_OUT_OF_RANGE"
    consumed = consume_kafkajs(bootstrap, topic, f"{topic}-readers", sum(ends[p] - wanted[p] for p in wanted))
    assert sorted((c.partition, c.offset) for c in consumed) == sorted(
        (d.partition, d.offset) for d in delivered if d.offset >= wanted[d.partition]
    )


def test_admin_acl_calls_see_security_disabled(bootstrap: str) -> None:
    """describeAcls, createAcls and deleteAcls fail as against Kafka without an authorizer."""
    result = kafkajs(bootstrap, "acls", topic="kjs-acl")
    assert result == {
        "described": {"error": "SECURITY_DISABLED"},
        "created": {"error": "SECURITY_DISABLED"},
        "deleted": {"error": "SECURITY_DISABLED"},
    }


@pytest.mark.parametrize("idempotent", [False, True], ids=["plain", "idempotent"])
@pytest.mark.parametrize("compression", ["None", "GZIP"])
def test_produce_every_field_read_back_by_both_clients(
    bootstrap: str, make_topic: Callable[..., str], compression: str, idempotent: bool
) -> None:
    topic = make_topic(f"kjs-{compression.lower()}", PARTITIONS)
    records = as_kafkajs_writes(make_records(1500, seed=700 + idempotent, null_header_values=False))
    result = kafkajs(
        bootstrap,
        "produce",
        topic=topic,
        partitions=PARTITIONS,
        records=to_job(records),
        idempotent=idempotent,
        compression=compression,
        chunk=500,
    )
    delivered = [Delivered(i, d["partition"], d["offset"]) for i, d in enumerate(result["delivered"])]
    # Keyed records on the Java partitioner's partition, fields intact, offsets 0..n-1 per partition.
    for consumed in (
        consume_all(bootstrap, topic, PARTITIONS, len(records)),
        consume_kafkajs(bootstrap, topic, f"{topic}-readers", len(records)),
    ):
        check_roundtrip(records, delivered, consumed, num_partitions=PARTITIONS)


def test_group_commits_offsets_and_resumes_after_them(bootstrap: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic("kjs-group", PARTITIONS)
    group = f"{topic}-group"
    first = make_records(300, seed=710)
    ends = end_offsets(produce_all(bootstrap, topic, first))
    assert len(consume_kafkajs(bootstrap, topic, group, len(first))) == len(first)
    assert committed_offsets(bootstrap, group, topic) == ends

    second = make_records(200, seed=711)
    delivered = produce_all(bootstrap, topic, second)
    resumed = consume_kafkajs(bootstrap, topic, group, len(second))
    assert sorted((c.partition, c.offset) for c in resumed) == sorted((d.partition, d.offset) for d in delivered)
    assert all(c.offset >= ends[c.partition] for c in resumed)


def test_transactions_commit_and_abort(bootstrap: str, make_topic: Callable[..., str]) -> None:
    topic = make_topic("kjs-txn", PARTITIONS)
    records = as_kafkajs_writes(make_records(150, seed=720, null_header_values=False))
    log = TxnLog(PARTITIONS, records)
    plan = [(range(0, 60), True), (range(60, 100), False), (range(100, 150), True)]
    transactions = []
    for indexes, commit in plan:
        log.transaction(indexes, commit=commit)
        batch = [records[i] for i in indexes]
        job = to_job(batch, lambda k, first=indexes.start: round_robin(first + k, PARTITIONS))
        transactions.append({"records": job, "commit": commit})

    result = kafkajs(bootstrap, "txn", topic=topic, transactionalId=f"{topic}-txn", transactions=transactions)

    delivered = []
    for (indexes, _commit), outcome in zip(plan, result["outcomes"], strict=True):
        base = {o["partition"]: o["baseOffset"] for o in outcome}
        for i in indexes:  # each partition's records follow its base offset, in send order
            p = round_robin(i, PARTITIONS)
            delivered.append(Delivered(i, p, base[p]))
            base[p] += 1
    check_delivered(log, delivered)
    committed = log.visible(read_committed=True)
    everything = log.visible(read_committed=False)
    check_consumed(log, consume_all(bootstrap, topic, PARTITIONS, len(committed)), read_committed=True)
    check_consumed(
        log,
        consume_all(bootstrap, topic, PARTITIONS, len(everything), **{"isolation.level": "read_uncommitted"}),
        read_committed=False,
    )
    check_consumed(log, consume_kafkajs(bootstrap, topic, f"{topic}-rc", len(committed)), read_committed=True)
    check_consumed(
        log,
        consume_kafkajs(bootstrap, topic, f"{topic}-ru", len(everything), read_uncommitted=True),
        read_committed=False,
    )


def test_consume_transform_produce_copies_each_record_once(bootstrap: str, make_topic: Callable[..., str]) -> None:
    source, sink = make_topic("kjs-src", PARTITIONS), make_topic("kjs-sink", PARTITIONS)
    group = f"{source}-copier"
    records = make_records(600, seed=730, null_key_and_value=False)
    delivered = produce_all(bootstrap, source, records)

    result = kafkajs(
        bootstrap, "copy", source=source, sink=sink, groupId=group, transactionalId=f"{group}-txn", expected=600
    )
    assert result["copied"] == len(records)
    assert result["transactions"] >= PARTITIONS

    copies = consume_all(bootstrap, sink, PARTITIONS, len(records))
    by_source = {}
    for c in copies:
        origin = dict(c.headers)["source"]
        assert origin not in by_source, f"record {origin} copied twice"
        by_source[origin] = c
    for d in delivered:
        copy = by_source[f"{d.partition}/{d.offset}".encode()]
        assert copy.key == records[d.index].key
        assert copy.value == b"copied:" + (records[d.index].value or b"")
    assert committed_offsets(bootstrap, group, source) == end_offsets(delivered)
