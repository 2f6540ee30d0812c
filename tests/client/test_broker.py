"""The async client against a real broker subprocess, on asyncio and trio, with confluent-kafka for interop."""

from __future__ import annotations

import time
from collections.abc import Callable

import anyio
import pytest
from confluent_kafka import Consumer as CKConsumer
from confluent_kafka import Producer as CKProducer
from confluent_kafka import TopicPartition as CKTopicPartition
from oncelog.client import (
    Admin,
    Consumer,
    ConsumerRecord,
    FatalProducerError,
    KafkaError,
    Producer,
    ProducerFencedError,
    TopicPartition,
    TxnState,
    partition_for_key,
)
from oncelog.protocol import ErrorCode

pytestmark = pytest.mark.anyio


async def consume_all(
    bootstrap: str,
    topic: str,
    partitions: int,
    *,
    isolation: str = "read_uncommitted",
    expect: int | None = None,
    timeout_s: float = 5.0,
) -> list[ConsumerRecord]:
    """Every record of ``topic`` from the beginning (until ``expect`` records or an idle fetch)."""
    out: list[ConsumerRecord] = []
    async with Consumer(bootstrap, isolation_level=isolation, auto_offset_reset="earliest") as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            got = await c.getmany(timeout_ms=300)
            if not got and (expect is None or len(out) >= expect):
                break
            out += [r for rs in got.values() for r in rs]
    return sorted(out, key=lambda r: (r.partition, r.offset))


def ck_consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    expect: int,
    *,
    isolation: str = "read_committed",
    timeout_s: float = 10.0,
) -> list:
    c = CKConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ck-{topic}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        c.assign([CKTopicPartition(topic, p, 0) for p in range(partitions)])
        got = []
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            msg = c.poll(0.2)
            if msg is None:
                if len(got) >= expect:
                    break
                continue
            if msg.error():
                continue
            got.append(msg)
        return got
    finally:
        c.close()


async def test_round_trip_keys_headers_compression(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic("rt", 2)
    sent = []
    for codec in ("gzip", "snappy", "lz4", "zstd", None):
        async with Producer(bootstrap_servers, compression_type=codec, linger_ms=2) as p:
            futs = [
                await p.send(
                    topic,
                    f"{codec}-{i}".encode(),
                    key=f"k{i}".encode(),
                    partition=i % 2,
                    headers=[("h", b"x"), ("n", None)],
                    timestamp_ms=1_700_000_000_000 + i,
                )
                for i in range(50)
            ]
            sent += [await f for f in futs]
    records = await consume_all(bootstrap_servers, topic, 2, expect=250)
    assert len(records) == 250
    by_pos = {(r.partition, r.offset): r for r in records}
    assert len({(m.partition, m.offset) for m in sent}) == 250
    r = by_pos[(sent[0].partition, sent[0].offset)]
    assert (r.key, r.value, r.headers, r.timestamp) == (b"k0", b"gzip-0", (("h", b"x"), ("n", None)), 1_700_000_000_000)
    for partition in (0, 1):
        offsets = [r.offset for r in records if r.partition == partition]
        assert offsets == list(range(125))


async def test_seek_position_and_max_records(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic("seek", 1)
    tp = TopicPartition(topic, 0)
    async with Producer(bootstrap_servers) as p:
        for i in range(20):
            await p.send(topic, str(i), partition=0)
        await p.flush()
    async with Consumer(bootstrap_servers, auto_offset_reset="latest") as c:
        c.assign([tp])
        assert await c.position(tp) == 20
        await c.seek_to_beginning()
        assert await c.position(tp) == 0
        c.seek(tp, 5)
        got = await c.getmany(timeout_ms=2000, max_records=3)
        assert [r.offset for r in got[tp]] == [5, 6, 7]
        assert await c.position(tp) == 8
        rest = await c.getmany(timeout_ms=2000)
        assert [r.value for r in rest[tp]] == [str(i).encode() for i in range(8, 20)]
        c.seek(tp, 18)
        seen = []
        async for record in c:
            seen.append(record.offset)
            if len(seen) == 2:
                break
        assert seen == [18, 19]
        with anyio.move_on_after(0.3):
            assert await c.getmany(timeout_ms=100) == {}


async def test_transactions_commit_and_abort_read_committed(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic("txn", 3)
    async with Producer(bootstrap_servers, transactional_id=f"tid-{topic}", compression_type="lz4") as p:
        await p.init_transactions()
        for n, commit in enumerate((True, False, True)):
            await p.begin_transaction()
            for i in range(9):
                await p.send(topic, f"{n}-{i}", key=f"{i}")
            if commit:
                await p.commit_transaction()
            else:
                await p.flush()
                await p.abort_transaction()
        await p.begin_transaction()
        await p.send(topic, b"open", partition=0)
        await p.flush()  # left open: read_committed must stop before it
        committed = await consume_all(bootstrap_servers, topic, 3, isolation="read_committed", expect=18)
        uncommitted = await consume_all(bootstrap_servers, topic, 3, expect=28)
        ck = await anyio.to_thread.run_sync(ck_consume, bootstrap_servers, topic, 3, 18)
        await p.abort_transaction()
    assert sorted(r.value for r in committed) == sorted(f"{n}-{i}".encode() for n in (0, 2) for i in range(9))
    assert len(uncommitted) == 28  # aborted and open records, but never the markers
    assert sorted(m.value() for m in ck) == sorted(r.value for r in committed)


async def test_every_transaction_ends_with_a_new_epoch(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    """EndTxn v5 (KIP-890 part 2): the producer adopts the bumped epoch and restarts its sequences at 0."""
    topic = new_topic("bump", 1)
    async with Producer(bootstrap_servers, transactional_id=f"tid-{topic}") as p:
        await p.init_transactions()
        pid, epoch = p.producer_id_and_epoch
        for n, commit in enumerate((True, False, True, True)):
            await p.begin_transaction()
            await p.send(topic, f"{n}-a", partition=0)
            await p.send(topic, f"{n}-b", partition=0)
            if commit:
                await p.commit_transaction()
            else:
                await p.flush()  # so the partition is in the transaction and EndTxn is sent
                await p.abort_transaction()
            assert p.producer_id_and_epoch == (pid, epoch + n + 1)
        async with Admin(bootstrap_servers) as admin:
            [state] = (await admin.describe_producers([TopicPartition(topic, 0)]))[TopicPartition(topic, 0)]
    # The last marker carried the bumped epoch, which clears the partition's sequence state; each transaction's
    # first batch was accepted only because the client restarted at sequence 0 with its new epoch.
    assert (state.producer_id, state.producer_epoch, state.last_sequence) == (pid, epoch + 4, -1)
    committed = await consume_all(bootstrap_servers, topic, 1, isolation="read_committed", expect=6)
    assert [r.value for r in committed] == [b"0-a", b"0-b", b"2-a", b"2-b", b"3-a", b"3-b"]


async def test_fencing_by_second_producer(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic("fence", 1)
    tid = f"tid-{topic}"
    async with Producer(bootstrap_servers, transactional_id=tid) as old:
        await old.init_transactions()
        await old.begin_transaction()
        await old.send_and_wait(topic, b"zombie", partition=0)
        async with Producer(bootstrap_servers, transactional_id=tid) as new:
            await new.init_transactions()  # aborts the old transaction and bumps the epoch
            assert new.producer_id_and_epoch[1] > old.producer_id_and_epoch[1]
            with pytest.raises((ProducerFencedError, FatalProducerError)):
                await old.send_and_wait(topic, b"late", partition=0)
                await old.commit_transaction()
            assert old.transaction_state is TxnState.FATAL_ERROR
            with pytest.raises(FatalProducerError):
                await old.begin_transaction()
            await new.begin_transaction()
            await new.send(topic, b"fresh", partition=0)
            await new.commit_transaction()
    committed = await consume_all(bootstrap_servers, topic, 1, isolation="read_committed", expect=1)
    assert [r.value for r in committed] == [b"fresh"]


async def test_transaction_timeout_aborts_and_fences(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic("tto", 1)
    async with Producer(bootstrap_servers, transactional_id=f"tid-{topic}", transaction_timeout_ms=300) as p:
        await p.init_transactions()
        await p.begin_transaction()
        await p.send_and_wait(topic, b"too-slow", partition=0)
        await anyio.sleep(1.2)  # timeout 300 ms + cleanup interval 200 ms, with margin
        with pytest.raises(KafkaError) as info:
            await p.commit_transaction()
        assert info.value.code in (ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH)
        assert p.transaction_state is TxnState.FATAL_ERROR
    assert await consume_all(bootstrap_servers, topic, 1, isolation="read_committed", timeout_s=1) == []
    async with Admin(bootstrap_servers) as admin:
        desc = (await admin.describe_transactions([f"tid-{topic}"]))[f"tid-{topic}"]
    assert desc.state in ("CompleteAbort", "PrepareAbort")


async def test_confluent_reads_our_records_field_by_field(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic("ck-read", 3)
    async with Producer(bootstrap_servers, transactional_id=f"tid-{topic}", compression_type="zstd") as p:
        await p.init_transactions()
        await p.begin_transaction()
        futs = [
            await p.send(
                topic,
                f"value-{i}",
                key=f"key-{i}",
                headers=[("idx", str(i).encode())],
                timestamp_ms=1_600_000_000_000 + i,
            )
            for i in range(30)
        ]
        await p.commit_transaction()
        meta = [await f for f in futs]
    msgs = await anyio.to_thread.run_sync(ck_consume, bootstrap_servers, topic, 3, 30)
    assert len(msgs) == 30
    by_key = {m.key(): m for m in msgs}
    for i, md in enumerate(meta):
        m = by_key[f"key-{i}".encode()]
        assert m.value() == f"value-{i}".encode()
        assert m.headers() == [("idx", str(i).encode())]
        assert m.timestamp() == (1, 1_600_000_000_000 + i)  # (TIMESTAMP_CREATE_TIME, ms)
        assert (m.partition(), m.offset()) == (md.partition, md.offset)
        assert md.partition == partition_for_key(f"key-{i}".encode(), 3)


async def test_same_partition_as_confluent_murmur2_random(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic("part", 7)
    keys = [f"user-{i}".encode() for i in range(60)] + [b"", b"\xff\x00", "ключ".encode()]

    def confluent_partitions() -> dict[bytes, int]:
        out: dict[bytes, int] = {}
        ck = CKProducer({"bootstrap.servers": bootstrap_servers, "partitioner": "murmur2_random"})
        for key in keys:
            ck.produce(topic, b"v", key=key, on_delivery=lambda err, msg: out.__setitem__(msg.key(), msg.partition()))
        ck.flush(10)
        return out

    theirs = await anyio.to_thread.run_sync(confluent_partitions)
    async with Producer(bootstrap_servers) as p:
        ours = {key: (await p.send_and_wait(topic, b"v", key=key)).partition for key in keys}
    assert ours == theirs


async def test_we_read_what_confluent_writes(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic("ck-write", 2)

    def write() -> None:
        ck = CKProducer(
            {"bootstrap.servers": bootstrap_servers, "transactional.id": f"ck-{topic}", "compression.type": "gzip"}
        )
        ck.init_transactions(10)
        for commit in (True, False):
            ck.begin_transaction()
            for i in range(10):
                ck.produce(
                    topic,
                    f"{commit}-{i}".encode(),
                    key=f"k{i}".encode(),
                    partition=i % 2,
                    headers=[("c", b"1")],
                    timestamp=1_650_000_000_000 + i,
                )
            ck.flush(10)
            (ck.commit_transaction if commit else ck.abort_transaction)(10)

    await anyio.to_thread.run_sync(write)
    committed = await consume_all(bootstrap_servers, topic, 2, isolation="read_committed", expect=10)
    everything = await consume_all(bootstrap_servers, topic, 2, expect=20)
    assert sorted(r.value for r in committed) == sorted(f"True-{i}".encode() for i in range(10))
    assert len(everything) == 20
    r = next(r for r in committed if r.value == b"True-3")
    assert (r.key, r.partition, r.headers, r.timestamp) == (b"k3", 1, (("c", b"1"),), 1_650_000_000_003)


async def test_admin_topics_configs_and_transactions(bootstrap_servers: str) -> None:
    from .conftest import fresh_name

    topic = fresh_name("adm")
    async with Admin(bootstrap_servers) as admin:
        await admin.create_topic(topic, 2, configs={"retention.ms": "3600000"})
        with pytest.raises(KafkaError) as info:
            await admin.create_topic(topic, 2)
        assert info.value.code == ErrorCode.TOPIC_ALREADY_EXISTS
        assert (await admin.list_topics())[topic] == 2
        assert set((await admin.describe_topics([topic]))[topic]) == {0, 1}
        assert await admin.create_partitions({topic: 3}, validate_only=True) == {topic: None}
        assert (await admin.list_topics())[topic] == 2
        assert await admin.create_partitions({topic: 3}) == {topic: None}
        assert set((await admin.describe_topics([topic]))[topic]) == {0, 1, 2}
        refused = (await admin.create_partitions({topic: 2}))[topic]
        assert refused is not None and refused.code == ErrorCode.INVALID_PARTITIONS
        assert (await admin.describe_configs("topic", topic, ["retention.ms"]))["retention.ms"] == "3600000"
        tid = f"hang-{topic}"
        tp = TopicPartition(topic, 1)
        async with Producer(bootstrap_servers, transactional_id=tid) as p:
            await p.init_transactions()
            await p.begin_transaction()
            await p.send_and_wait(topic, b"hanging", partition=1)
            pid, epoch = p.producer_id_and_epoch
            listed = {t.transactional_id: t for t in await admin.list_transactions()}
            assert listed[tid].producer_id == pid and listed[tid].state == "Ongoing"
            desc = (await admin.describe_transactions([tid]))[tid]
            assert (desc.state, desc.producer_id, desc.partitions) == ("Ongoing", pid, [tp])
            producers = (await admin.describe_producers([tp]))[tp]
            active = next(s for s in producers if s.producer_id == pid)
            assert active.producer_epoch == epoch and active.current_txn_start_offset == 0
            await admin.abort_transaction(tp, pid, epoch)
            async with Consumer(bootstrap_servers, isolation_level="read_committed") as c:
                c.assign([tp])
                await c.seek_to_end(tp)
                assert await c.position(tp) == 2  # the record and the ABORT marker are stable now
            await p.close(flush=False)
        deleted = await admin.delete_topics([topic])
        assert deleted == {topic: None}
        assert topic not in await admin.list_topics()


async def test_admin_incremental_alter_configs(bootstrap_servers: str) -> None:
    from .conftest import fresh_name

    topic = fresh_name("cfg")
    async with Admin(bootstrap_servers) as admin:
        await admin.create_topic(topic, 1)
        await admin.incremental_alter_configs(
            "topic", topic, [("retention.ms", "set", "60000"), ("cleanup.policy", "append", "compact")]
        )
        keys = ["retention.ms", "cleanup.policy"]
        assert await admin.describe_configs("topic", topic, keys) == {
            "retention.ms": "60000",
            "cleanup.policy": "delete,compact",
        }
        await admin.incremental_alter_configs("topic", topic, [("retention.ms", "delete", None)])
        await admin.incremental_alter_configs("topic", topic, [("cleanup.policy", "set", "delete")], validate_only=True)
        assert await admin.describe_configs("topic", topic, keys) == {
            "retention.ms": "604800000",
            "cleanup.policy": "delete,compact",
        }
        with pytest.raises(KafkaError) as info:
            await admin.incremental_alter_configs("topic", topic, [("retention.ms", "append", "1")])
        assert info.value.code == ErrorCode.INVALID_CONFIG
        with pytest.raises(KafkaError) as info:
            await admin.incremental_alter_configs("broker", "1", [("num.partitions", "set", "3")])
        assert info.value.code == ErrorCode.INVALID_REQUEST
