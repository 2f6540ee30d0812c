"""Interop over SASL_PLAINTEXT with the other stock clients: kafka-python and kafkajs with PLAIN and SCRAM-SHA-256/512,
kcat (librdkafka) with PLAIN; each also refused with a wrong password. SCRAM users are created through the PLAINTEXT
listener of the same broker with confluent-kafka's AdminClient."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator

import pytest
from kafka import KafkaAdminClient
from kafka.errors import KafkaError as KafkaPythonError
from support.broker import BrokerProcess
from support.dataset import check_roundtrip, make_records
from support.sasl import LOGINS, running_sasl_broker
from support.topics import create_topic_confluent
from test_kafka_python import consume_all as kp_consume_all
from test_kafka_python import produce_all as kp_produce_all
from test_kafkajs import as_kafkajs_writes, kafkajs, to_job
from test_kcat import kcat

PARTITIONS = 2
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_sasl_broker(tmp_path_factory.mktemp("sasl-clients") / "data") as proc:
        yield proc


def _topic(broker: BrokerProcess, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic_confluent(broker.bootstrap_for("PLAINTEXT"), name, PARTITIONS)
    return name


def _kafka_python(mechanism: str, user: str, password: str) -> dict[str, str]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": user,
        "sasl_plain_password": password,
    }


@pytest.mark.parametrize(("mechanism", "user", "password"), LOGINS)
def test_kafka_python(sasl_broker: BrokerProcess, mechanism: str, user: str, password: str) -> None:
    bootstrap = sasl_broker.bootstrap_for("SASL_PLAINTEXT")
    topic = _topic(sasl_broker, f"kp-{mechanism.lower()}")
    records = make_records(300, seed=11, null_header_values=False, null_key_and_value=False)
    conf = _kafka_python(mechanism, user, password)
    delivered = kp_produce_all(bootstrap, topic, records, **conf)
    consumed = kp_consume_all(bootstrap, topic, PARTITIONS, len(records), **conf)
    check_roundtrip(records, delivered, consumed, num_partitions=PARTITIONS)


@pytest.mark.parametrize(("mechanism", "user"), [(m, u) for m, u, _ in LOGINS])
def test_kafka_python_wrong_password(
    sasl_broker: BrokerProcess, mechanism: str, user: str, caplog: pytest.LogCaptureFixture
) -> None:
    # kafka-python retries the bootstrap until its timeout, logging each authentication error it was sent.
    with pytest.raises(KafkaPythonError):
        KafkaAdminClient(
            bootstrap_servers=sasl_broker.bootstrap_for("SASL_PLAINTEXT"),
            bootstrap_timeout_ms=2000,
            **_kafka_python(mechanism, user, "wrong"),
        )
    assert (
        "SaslAuthenticationFailedError: Authentication failed during authentication due to invalid credentials with "
        f"SASL mechanism {mechanism}"
    ) in caplog.text


@pytest.mark.parametrize(("mechanism", "user", "password"), LOGINS)
def test_kafkajs(sasl_broker: BrokerProcess, mechanism: str, user: str, password: str) -> None:
    bootstrap = sasl_broker.bootstrap_for("SASL_PLAINTEXT")
    sasl = {"mechanism": mechanism.lower(), "username": user, "password": password}
    topic = _topic(sasl_broker, f"kjs-{mechanism.lower()}")
    records = as_kafkajs_writes(make_records(200, seed=12, null_header_values=False))
    result = kafkajs(
        bootstrap,
        "produce",
        topic=topic,
        partitions=PARTITIONS,
        records=to_job(records),
        idempotent=False,
        compression="none",
        chunk=50,
        sasl=sasl,
    )
    assert len(result["delivered"]) == len(records)
    consumed = kafkajs(
        bootstrap,
        "consume",
        topic=topic,
        groupId=f"kjs-{uuid.uuid4()}",
        expected=len(records),
        readUncommitted=False,
        idleMs=500,
        sasl=sasl,
    )["consumed"]
    assert sorted(map(str, (c["value"] for c in consumed))) == sorted(map(str, (r["value"] for r in to_job(records))))


@pytest.mark.parametrize(("mechanism", "user"), [(m, u) for m, u, _ in LOGINS])
def test_kafkajs_wrong_password(sasl_broker: BrokerProcess, mechanism: str, user: str) -> None:
    sasl = {"mechanism": mechanism.lower(), "username": user, "password": "wrong"}
    with pytest.raises(AssertionError) as error:
        kafkajs(
            sasl_broker.bootstrap_for("SASL_PLAINTEXT"),
            "produce",
            topic="never",
            partitions=1,
            records=[],
            idempotent=False,
            compression="none",
            chunk=1,
            sasl=sasl,
        )
    assert "KafkaJSSASLAuthenticationError" in str(error.value)
    assert f"invalid credentials with SASL mechanism {mechanism}" in str(error.value)


def test_kcat_plain(sasl_broker: BrokerProcess) -> None:
    sasl = [
        "-X",
        "security.protocol=SASL_PLAINTEXT",
        "-X",
        "sasl.mechanism=PLAIN",
        "-X",
        "sasl.username=alice",
        "-X",
        "sasl.password=alice-secret",
    ]
    bootstrap = sasl_broker.bootstrap_for("SASL_PLAINTEXT")
    topic = _topic(sasl_broker, "kcat-plain")
    lines = [f"k{i}:v{i}" for i in range(100)]
    kcat("-b", bootstrap, *sasl, "-P", "-t", topic, "-K", ":", stdin="\n".join(lines).encode() + b"\n")
    out = kcat("-b", bootstrap, *sasl, "-C", "-t", topic, "-e", "-o", "beginning", "-q", "-f", "%k:%s\\n")
    assert sorted(out.decode().split("\n")[:-1]) == sorted(lines)
    metadata = kcat("-b", bootstrap, *sasl, "-L", "-t", topic).decode()
    assert f"127.0.0.1:{sasl_broker.ports['SASL_PLAINTEXT']}" in metadata


def test_kcat_plain_wrong_password(sasl_broker: BrokerProcess) -> None:
    with pytest.raises((AssertionError, subprocess.TimeoutExpired)) as error:
        kcat(
            "-b",
            sasl_broker.bootstrap_for("SASL_PLAINTEXT"),
            "-X",
            "security.protocol=SASL_PLAINTEXT",
            "-X",
            "sasl.mechanism=PLAIN",
            "-X",
            "sasl.username=alice",
            "-X",
            "sasl.password=wrong",
            "-m",
            "2",  # librdkafka logs the refusal within a fraction of a second; kcat fails after its metadata timeout
            "-L",
        )
    assert "invalid credentials with SASL mechanism PLAIN" in str(error.value)
