"""Interop over TLS: stock clients against a broker whose listener is ``SSL://`` (certificates made by the test).

confluent-kafka (librdkafka) produces and consumes every record field and runs committed and aborted transactions;
kafka-python, aiokafka, kcat and kafkajs produce and consume; with ``ssl.client.auth=required`` a client presenting a
certificate signed by the truststore's CA gets in and one without a certificate does not. Every client checks the
broker's certificate (CA and 127.0.0.1 in its subject alternative names).
"""

from __future__ import annotations

import asyncio
import base64
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka import TopicPartition as AioPartition
from aiokafka.helpers import create_ssl_context
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from conftest import GROUP_SETTINGS, unique_topic
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KafkaPythonPartition
from support.broker import BrokerProcess
from support.confluent_io import consume_all, produce_all
from support.dataset import check_roundtrip, make_records
from support.tls import Pki, TlsBrokerProcess, make_pki
from support.topics import wait_topic_visible
from test_kafkajs import kafkajs

PARTITIONS = 3
DEADLINE_S = 40.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[TlsBrokerProcess]:
    proc = TlsBrokerProcess(
        tmp_path_factory.mktemp("tls-broker") / "data", settings={**GROUP_SETTINGS, **pki.keystore_settings()}
    )
    try:
        yield proc.start()
    finally:
        proc.close()


@pytest.fixture
def mtls_broker(tmp_path: Path, pki: Pki) -> Iterator[TlsBrokerProcess]:
    proc = TlsBrokerProcess(tmp_path / "data", settings={**GROUP_SETTINGS, **pki.mtls_settings()})
    try:
        yield proc.start()
    finally:
        proc.close()


def confluent_ssl(pki: Pki, *, client_cert: bool = False) -> dict[str, str]:
    conf = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
    if client_cert:
        conf |= {"ssl.certificate.location": str(pki.client_cert), "ssl.key.location": str(pki.client_key)}
    return conf


def create_topic(bootstrap: str, name: str, conf: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, **conf})
    futures = admin.create_topics([NewTopic(name, PARTITIONS, 1)], request_timeout=10, operation_timeout=10)
    futures[name].result(timeout=DEADLINE_S)
    wait_topic_visible(admin, name, PARTITIONS)


def kcat(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    exe = shutil.which("kcat") or shutil.which("kafkacat")
    assert exe, "kcat is not installed (apt-get install -y kcat)"
    return subprocess.run([exe, *args], input=stdin, capture_output=True, timeout=DEADLINE_S, check=False)


def read_committed_values(bootstrap: str, topic: str, conf: dict[str, str], expected: int) -> list[bytes]:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "tls-unused", "isolation.level": "read_committed",
         "enable.auto.commit": False, **conf}
    )  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        values: list[bytes] = []
        end = time.monotonic() + DEADLINE_S
        while len(values) < expected and time.monotonic() < end:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        for _ in range(3):  # nothing beyond the committed records turns up
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        return values
    finally:
        consumer.close()


def test_confluent_kafka_produces_and_consumes_every_field_over_ssl(tls_broker, pki) -> None:
    topic = unique_topic("tls-ck")
    conf = confluent_ssl(pki)
    create_topic(tls_broker.bootstrap, topic, conf)
    records = make_records(3000, seed=71)
    delivered = produce_all(tls_broker.bootstrap, topic, records, **conf)
    consumed = consume_all(tls_broker.bootstrap, topic, PARTITIONS, len(records), **conf)
    check_roundtrip(records, delivered, consumed, num_partitions=PARTITIONS)


def test_confluent_kafka_transactions_over_ssl(tls_broker, pki) -> None:
    topic = unique_topic("tls-txn")
    conf = confluent_ssl(pki)
    create_topic(tls_broker.bootstrap, topic, conf)
    producer = Producer({"bootstrap.servers": tls_broker.bootstrap, "transactional.id": "tls-txn", **conf})
    producer.init_transactions(DEADLINE_S)
    for name, commit in (("a", True), ("b", False), ("c", True)):
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, value=f"{name}{i}".encode(), key=f"{i}".encode())
        if commit:
            producer.commit_transaction(DEADLINE_S)
        else:
            producer.abort_transaction(DEADLINE_S)
    values = read_committed_values(tls_broker.bootstrap, topic, conf, 20)
    assert sorted(values) == sorted(f"{name}{i}".encode() for name in "ac" for i in range(10))


def test_kafka_python_over_ssl(tls_broker, pki) -> None:
    topic = unique_topic("tls-kp")
    create_topic(tls_broker.bootstrap, topic, confluent_ssl(pki))
    ssl_conf = {"security_protocol": "SSL", "ssl_cafile": str(pki.ca)}
    producer = KafkaProducer(bootstrap_servers=tls_broker.bootstrap, **ssl_conf)
    try:
        futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(200)]
        producer.flush(timeout=DEADLINE_S)
        assert all(future.get(timeout=1).offset >= 0 for future in futures)
    finally:
        producer.close(timeout=5)
    consumer = KafkaConsumer(bootstrap_servers=tls_broker.bootstrap, group_id=None, **ssl_conf)
    try:
        partitions = [KafkaPythonPartition(topic, p) for p in range(PARTITIONS)]
        consumer.assign(partitions)
        consumer.seek_to_beginning(*partitions)
        values: set[bytes] = set()
        end = time.monotonic() + DEADLINE_S
        while len(values) < 200 and time.monotonic() < end:
            for records in consumer.poll(timeout_ms=500).values():
                values.update(record.value for record in records)
    finally:
        consumer.close()
    assert values == {b"v%d" % i for i in range(200)}


def test_aiokafka_over_ssl(tls_broker, pki) -> None:
    topic = unique_topic("tls-aio")
    create_topic(tls_broker.bootstrap, topic, confluent_ssl(pki))

    async def roundtrip() -> set[bytes]:
        context = create_ssl_context(cafile=str(pki.ca))
        producer = AIOKafkaProducer(bootstrap_servers=tls_broker.bootstrap, security_protocol="SSL",
                                    ssl_context=context, enable_idempotence=True)  # fmt: skip
        await producer.start()
        try:
            for i in range(100):
                await producer.send(topic, b"aio-%d" % i, key=b"k%d" % i)
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=tls_broker.bootstrap, security_protocol="SSL",
                                    ssl_context=context, auto_offset_reset="earliest")  # fmt: skip
        await consumer.start()
        try:
            consumer.assign([AioPartition(topic, p) for p in range(PARTITIONS)])
            values: set[bytes] = set()
            async with asyncio.timeout(DEADLINE_S):
                while len(values) < 100:
                    batch = await consumer.getmany(timeout_ms=500)
                    values.update(record.value for records in batch.values() for record in records)
            return values
        finally:
            await consumer.stop()

    assert asyncio.run(roundtrip()) == {b"aio-%d" % i for i in range(100)}


def test_kcat_over_ssl(tls_broker, pki) -> None:
    topic = unique_topic("tls-kcat")
    ssl_args = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={pki.ca}"]
    lines = [f"k{i}:value-{i}" for i in range(500)]
    produced = kcat("-b", tls_broker.bootstrap, *ssl_args, "-P", "-t", topic, "-K", ":",
                    stdin="\n".join(lines).encode() + b"\n")  # fmt: skip
    assert produced.returncode == 0, produced.stderr.decode()[-2000:]
    consumed = kcat("-b", tls_broker.bootstrap, *ssl_args, "-C", "-t", topic, "-o", "beginning", "-e",
                    "-f", "%k:%s\n")  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr.decode()[-2000:]
    assert sorted(consumed.stdout.decode().splitlines()) == sorted(lines)


def test_kafkajs_over_ssl(tls_broker, pki) -> None:
    topic = unique_topic("tls-kafkajs")
    create_topic(tls_broker.bootstrap, topic, confluent_ssl(pki))
    tls = {"ca": [pki.ca.read_text()]}
    values = [b"kafkajs-%d" % i for i in range(100)]
    records = [
        {"key": None, "value": base64.b64encode(v).decode(), "headers": [], "timestamp": int(time.time() * 1000)}
        for v in values
    ]
    kafkajs(tls_broker.bootstrap, "produce", ssl=tls, topic=topic, partitions=PARTITIONS, records=records,
            idempotent=False, compression="none", chunk=25)  # fmt: skip
    result = kafkajs(tls_broker.bootstrap, "consume", ssl=tls, topic=topic, groupId="tls-kafkajs",
                     expected=len(values), readUncommitted=False, idleMs=500)  # fmt: skip
    assert sorted(base64.b64decode(c["value"]) for c in result["consumed"]) == sorted(values)


def test_client_auth_required_lets_in_only_clients_with_a_trusted_certificate(mtls_broker, pki) -> None:
    bootstrap = mtls_broker.bootstrap
    topic = unique_topic("tls-mtls")
    # confluent-kafka: with the client certificate it works end to end ...
    with_cert = confluent_ssl(pki, client_cert=True)
    create_topic(bootstrap, topic, with_cert)
    records = make_records(200, seed=72)
    delivered = produce_all(bootstrap, topic, records, **with_cert)
    check_roundtrip(records, delivered, consume_all(bootstrap, topic, PARTITIONS, len(records), **with_cert),
                    num_partitions=PARTITIONS)  # fmt: skip
    # ... without one, the broker refuses the handshake: no metadata ever arrives.
    without = AdminClient({"bootstrap.servers": bootstrap, **confluent_ssl(pki)})
    with pytest.raises(KafkaException):
        without.list_topics(timeout=3)
    # kcat likewise, with and without.
    ssl_args = ["-X", "security.protocol=ssl", "-X", f"ssl.ca.location={pki.ca}"]
    cert_args = ["-X", f"ssl.certificate.location={pki.client_cert}", "-X", f"ssl.key.location={pki.client_key}"]
    assert kcat("-b", bootstrap, *ssl_args, *cert_args, "-L", "-t", topic).returncode == 0
    refused = kcat("-b", bootstrap, *ssl_args, "-L", "-t", topic, "-m", "3")
    assert refused.returncode != 0
    # kafkajs with the client certificate.
    tls = {"ca": [pki.ca.read_text()], "cert": pki.client_cert.read_text(), "key": pki.client_key.read_text()}
    result = kafkajs(bootstrap, "consume", ssl=tls, topic=topic, groupId="tls-mtls-kafkajs", expected=len(records),
                     readUncommitted=False, idleMs=500)  # fmt: skip
    assert len(result["consumed"]) == len(records)


def test_each_tls_listener_uses_its_own_ssl_settings(tmp_path: Path, pki: Pki) -> None:
    # listener.name.internal.ssl.*: INTERNAL requires a client certificate, EXTERNAL (the broker's ssl.*) does not.
    settings = {
        "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:SSL",
        **pki.keystore_settings(),
        "listener.name.internal.ssl.client.auth": "required",
        "listener.name.internal.ssl.truststore.type": "PEM",
        "listener.name.internal.ssl.truststore.location": str(pki.ca),
    }
    with BrokerProcess(tmp_path / "data", settings=settings, listeners=("INTERNAL", "EXTERNAL")) as broker:
        external = AdminClient({"bootstrap.servers": broker.bootstrap_for("EXTERNAL"), **confluent_ssl(pki)})
        brokers = external.list_topics(timeout=10).brokers.values()
        assert [(b.host, b.port) for b in brokers] == [("127.0.0.1", broker.ports["EXTERNAL"])]
        internal = AdminClient({"bootstrap.servers": broker.bootstrap_for("INTERNAL"), **confluent_ssl(pki)})
        with pytest.raises(KafkaException):
            internal.list_topics(timeout=3)
        with_cert = {"bootstrap.servers": broker.bootstrap_for("INTERNAL"), **confluent_ssl(pki, client_cert=True)}
        brokers = AdminClient(with_cert).list_topics(timeout=10).brokers.values()
        assert [(b.host, b.port) for b in brokers] == [("127.0.0.1", broker.ports["INTERNAL"])]
