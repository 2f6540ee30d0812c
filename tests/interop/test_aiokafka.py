"""Interop: aiokafka 0.14 against the broker under test.

aiokafka needs asyncio while the suite runs trio, so each test drives its own ``asyncio.run``.
"""

from __future__ import annotations

import asyncio
import time

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from support.dataset import CODECS, Consumed, Delivered, SampleRecord, check_roundtrip, make_records

N_RECORDS = 10_000
PARTITIONS = 3
DEADLINE_S = 40.0
CREATE_TIME = 0
ERR_TOPIC_ALREADY_EXISTS = 36
ERR_INVALID_TOPIC_EXCEPTION = 17


async def produce_all(bootstrap: str, topic: str, records: list[SampleRecord], **conf: object) -> list[Delivered]:
    """Send ``records`` in order (aiokafka's default partitioner is Java murmur2) and await every result."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5, **conf)
    await producer.start()
    try:
        futures = []
        for rec in records:
            futures.append(
                await producer.send(
                    topic,
                    key=rec.key,
                    value=rec.value,
                    headers=list(rec.headers),
                    timestamp_ms=rec.timestamp_ms,
                )
            )
        metas = await asyncio.wait_for(asyncio.gather(*futures), DEADLINE_S)
        return [Delivered(i, md.partition, md.offset) for i, md in enumerate(metas)]
    finally:
        await producer.stop()


async def consume_all(bootstrap: str, topic: str, partitions: int, expected: int, **conf: object) -> list[Consumed]:
    """Assign every partition manually (no group), seek to beginning, read until ``expected`` arrived."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **conf,
    )
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        out: list[Consumed] = []
        end = time.monotonic() + DEADLINE_S
        while len(out) < expected:
            assert time.monotonic() < end, f"consumed {len(out)}/{expected} in {DEADLINE_S}s"
            batches = await consumer.getmany(*tps, timeout_ms=500, max_records=5000)
            for tp_records in batches.values():
                for m in tp_records:
                    out.append(
                        Consumed(
                            m.partition,
                            m.offset,
                            m.key,
                            m.value,
                            tuple(m.headers or ()),
                            m.timestamp if m.timestamp_type == CREATE_TIME else -1,
                        )
                    )
        extra = await consumer.getmany(*tps, timeout_ms=500)
        assert not any(extra.values()), "consumed more records than produced"
        return out
    finally:
        await consumer.stop()


def _topic_errors(response: object) -> dict[str, int]:
    return {t[0]: t[1] for t in response.topic_errors}  # type: ignore[attr-defined]


def test_admin_create_topics(bootstrap: str) -> None:
    from conftest import unique_topic

    async def run() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10000)
        await admin.start()
        try:
            name = unique_topic("ak-admin")
            resp = await admin.create_topics([NewTopic(name, PARTITIONS, 1)])
            assert _topic_errors(resp) == {name: 0}
            end = time.monotonic() + 15
            while True:
                [desc] = await admin.describe_topics([name])
                if desc["error_code"] == 0 and len(desc["partitions"]) == PARTITIONS:
                    break
                assert time.monotonic() < end, f"topic not visible: {desc}"
                await asyncio.sleep(0.1)

            resp = await admin.create_topics([NewTopic(name, PARTITIONS, 1)])
            assert _topic_errors(resp) == {name: ERR_TOPIC_ALREADY_EXISTS}
            resp = await admin.create_topics([NewTopic("bad topic name!", 1, 1)])
            assert _topic_errors(resp) == {"bad topic name!": ERR_INVALID_TOPIC_EXCEPTION}
            assert "bad topic name!" not in await admin.list_topics()
        finally:
            await admin.close()

    asyncio.run(run())


@pytest.mark.parametrize("codec", CODECS)
def test_roundtrip_every_field(bootstrap: str, make_topic, codec: str) -> None:
    topic = make_topic(f"ak-{codec}", PARTITIONS)
    records = make_records(
        N_RECORDS, seed=200 + CODECS.index(codec), null_header_values=False, null_key_and_value=False
    )

    async def run() -> None:
        delivered = await produce_all(bootstrap, topic, records, compression_type=None if codec == "none" else codec)
        consumed = await consume_all(bootstrap, topic, PARTITIONS, len(records), isolation_level="read_committed")
        check_roundtrip(records, delivered, consumed, num_partitions=PARTITIONS)

    asyncio.run(run())


def test_idempotent_producer_offsets(bootstrap: str, make_topic) -> None:
    topic = make_topic("ak-idem", PARTITIONS)
    records = make_records(N_RECORDS, seed=9, null_header_values=False, null_key_and_value=False)

    async def run() -> None:
        delivered = await produce_all(bootstrap, topic, records, enable_idempotence=True)
        consumed = await consume_all(bootstrap, topic, PARTITIONS, len(records))
        check_roundtrip(records, delivered, consumed, num_partitions=PARTITIONS)
        assert len({(d.partition, d.offset) for d in delivered}) == len(delivered)

    asyncio.run(run())
