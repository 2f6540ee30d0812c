"""Interop over SASL_SSL: TLS and then SASL on one listener, beside a PLAINTEXT and an SSL listener of the same broker.

confluent-kafka (librdkafka) logs in with SCRAM-SHA-256 (a user made over PLAINTEXT with
``alter_user_scram_credentials``) and runs a committed and an aborted transaction read back read_committed; a wrong
password is an authentication error; each listener's Metadata names that listener's own port. kcat logs in with PLAIN;
the bundled client with SCRAM-SHA-256 and PLAIN, and its CLI tools through ``--command-config``; kafkajs with PLAIN.
Every client checks the broker's certificate.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion
from oncelog.client import Admin
from oncelog.client import Consumer as OncelogConsumer
from oncelog.client import Producer as OncelogProducer
from oncelog.client import TopicPartition as OncelogPartition
from support.broker import BrokerProcess, default_command
from support.confluent_io import commit_then_abort
from support.sasl import PLAIN_JAAS, authentication_errors
from support.tls import Pki, make_pki
from support.topics import create_topic_confluent
from test_kafkajs import kafkajs

PARTITIONS = 2
DEADLINE_S = 40.0
SCRAM_USER, SCRAM_PASSWORD = "carol", "carol-secret"
LISTENERS = ("PLAINTEXT", "SSL", "SASL_SSL")


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[BrokerProcess]:
    settings = {
        **pki.keystore_settings(),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": PLAIN_JAAS,
        "group.initial.rebalance.delay.ms": "0",
    }
    proc = BrokerProcess(tmp_path_factory.mktemp("sasl-ssl") / "data", settings=settings, listeners=LISTENERS)
    try:
        proc.start()
        admin = AdminClient({"bootstrap.servers": proc.bootstrap_for("PLAINTEXT")})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
        upsert = UserScramCredentialUpsertion(SCRAM_USER, info, SCRAM_PASSWORD.encode())
        for future in admin.alter_user_scram_credentials([upsert]).values():
            future.result(timeout=DEADLINE_S)
        yield proc
    finally:
        proc.close()


def librdkafka_conf(broker: BrokerProcess, pki: Pki, mechanism: str, user: str, password: str) -> dict[str, str]:
    return {
        "bootstrap.servers": broker.bootstrap_for("SASL_SSL"),
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(pki.ca),
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def new_topic(broker: BrokerProcess, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic_confluent(broker.bootstrap_for("PLAINTEXT"), name, PARTITIONS)
    return name


def test_confluent_transactions_over_sasl_ssl_with_scram(broker: BrokerProcess, pki: Pki) -> None:
    conf = librdkafka_conf(broker, pki, "SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD)
    topic = new_topic(broker, "sasl-ssl-txn")
    assert commit_then_abort(conf, topic, PARTITIONS, 10) == sorted(b"committed-%d" % i for i in range(10))


def test_a_wrong_password_over_sasl_ssl_is_an_authentication_error(broker: BrokerProcess, pki: Pki) -> None:
    errors = authentication_errors(librdkafka_conf(broker, pki, "SCRAM-SHA-256", SCRAM_USER, "wrong"))
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def test_each_listener_advertises_its_own_port(broker: BrokerProcess, pki: Pki) -> None:
    tls = {"security.protocol": "SSL", "ssl.ca.location": str(pki.ca)}
    for name, conf in (
        ("PLAINTEXT", {"bootstrap.servers": broker.bootstrap_for("PLAINTEXT")}),
        ("SSL", {"bootstrap.servers": broker.bootstrap_for("SSL"), **tls}),
        ("SASL_SSL", librdkafka_conf(broker, pki, "PLAIN", "alice", "alice-secret")),
    ):
        metadata = AdminClient(conf).list_topics(timeout=10)
        assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", broker.ports[name])], name


def test_kcat_over_sasl_ssl_with_plain(broker: BrokerProcess, pki: Pki) -> None:
    exe = shutil.which("kcat") or shutil.which("kafkacat")
    assert exe, "kcat is not installed (apt-get install -y kcat)"
    topic = new_topic(broker, "sasl-ssl-kcat")
    common = [
        "-b",
        broker.bootstrap_for("SASL_SSL"),
        "-X",
        "security.protocol=SASL_SSL",
        "-X",
        f"ssl.ca.location={pki.ca}",
        "-X",
        "sasl.mechanisms=PLAIN",
        "-X",
        "sasl.username=alice",
    ]
    run = lambda *args, password="alice-secret", stdin=None: subprocess.run(  # noqa: E731
        [exe, *common, "-X", f"sasl.password={password}", *args],
        input=stdin,
        capture_output=True,
        timeout=DEADLINE_S,
        check=False,
    )
    produced = run("-P", "-t", topic, "-p", "0", stdin=b"one\ntwo\n")
    assert produced.returncode == 0, produced.stderr
    consumed = run("-C", "-t", topic, "-p", "0", "-o", "beginning", "-e")
    assert (consumed.returncode, consumed.stdout.split()) == (0, [b"one", b"two"]), consumed.stderr
    refused = run("-L", password="wrong")
    assert refused.returncode != 0
    assert b"Authentication failed" in refused.stderr or b"SASL authentication" in refused.stderr, refused.stderr


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [("SCRAM-SHA-256", SCRAM_USER, SCRAM_PASSWORD), ("PLAIN", "alice", "alice-secret")],
)
def test_bundled_client_over_sasl_ssl(
    broker: BrokerProcess, pki: Pki, mechanism: str, user: str, password: str
) -> None:
    security = {
        "security_protocol": "SASL_SSL",
        "ssl_ca_location": str(pki.ca),
        "sasl_mechanism": mechanism,
        "sasl_username": user,
        "sasl_password": password,
    }
    bootstrap = broker.bootstrap_for("SASL_SSL")
    topic = new_topic(broker, f"sasl-ssl-client-{mechanism.lower()}")

    async def main() -> tuple[set[bytes], dict[str, int]]:
        async with OncelogProducer(bootstrap, transactional_id=f"sasl-ssl-{uuid.uuid4()}", **security) as producer:
            await producer.init_transactions()
            await producer.begin_transaction()
            for i in range(4):
                await producer.send(topic, b"v%d" % i, key=b"k%d" % i)
            await producer.commit_transaction()
        values: set[bytes] = set()
        async with OncelogConsumer(
            bootstrap, isolation_level="read_committed", auto_offset_reset="earliest", **security
        ) as consumer:
            consumer.assign([OncelogPartition(topic, p) for p in range(PARTITIONS)])
            for _ in range(40):
                batch = await consumer.getmany(timeout_ms=300)
                values.update(record.value for records in batch.values() for record in records)
                if len(values) == 4:
                    break
        async with Admin(bootstrap, **security) as admin:
            return values, await admin.list_topics()

    values, topics = anyio.run(main)
    assert values == {b"v0", b"v1", b"v2", b"v3"}
    assert topics[topic] == PARTITIONS


def test_kafkajs_over_sasl_ssl_with_plain(broker: BrokerProcess, pki: Pki) -> None:
    topic = new_topic(broker, "sasl-ssl-kafkajs")
    values = [b"kjs-%d" % i for i in range(6)]
    now_ms = int(time.time() * 1000)
    records = [{"key": None, "value": base64.b64encode(v).decode(), "headers": [], "timestamp": now_ms} for v in values]
    login = {
        "ssl": {"ca": Path(pki.ca).read_text()},
        "sasl": {"mechanism": "plain", "username": "alice", "password": "alice-secret"},
    }
    bootstrap = broker.bootstrap_for("SASL_SSL")
    kafkajs(bootstrap, "produce", **login, topic=topic, partitions=PARTITIONS, records=records, idempotent=False,
            compression="none", chunk=3)  # fmt: skip
    result = kafkajs(bootstrap, "consume", **login, topic=topic, groupId=f"g-{uuid.uuid4()}", expected=len(values),
                     readUncommitted=False, idleMs=500)  # fmt: skip
    assert sorted(base64.b64decode(c["value"]) for c in result["consumed"]) == sorted(values)


def test_cli_tools_over_sasl_ssl_with_command_config(broker: BrokerProcess, pki: Pki, tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\n"
        f"ssl.ca.location={pki.ca}\n"
        "sasl.mechanism=SCRAM-SHA-256\n"
        f"sasl.username={SCRAM_USER}\n"
        f"sasl.password={SCRAM_PASSWORD}\n"
    )
    oncelog = default_command()[:-1]  # the oncelog command without "broker"

    def run(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*oncelog, *args, "-b", broker.bootstrap_for("SASL_SSL"), "--command-config", str(config)],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=DEADLINE_S,
            check=False,
        )

    topic = f"sasl-ssl-cli-{uuid.uuid4().hex[:8]}"
    assert run("topic", "create", topic, "--partitions", "1").stdout == f"created {topic}\n"
    assert run("produce", topic, "--transactional", f"cli-{topic}", stdin="one\ntwo\n").returncode == 0
    consumed = run("consume", topic, "--from-beginning", "--count", "2", "--isolation", "read_committed")
    assert (consumed.returncode, consumed.stdout.splitlines()) == (0, ["one", "two"]), consumed.stderr
    config.write_text(config.read_text().replace(f"sasl.password={SCRAM_PASSWORD}", "sasl.password=wrong"))
    refused = run("topic", "list")
    assert refused.returncode == 1
    assert "SaslAuthenticationError" in refused.stderr, refused.stderr
