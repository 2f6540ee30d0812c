"""The bundled client over TLS (security_protocol="SSL"), on asyncio and trio, against a broker's SSL:// listener."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from oncelog.client import Admin, Consumer, KafkaError, Producer, TopicPartition
from oncelog.client.errors import ConfigError
from oncelog.client.security import client_ssl_context
from support.tls import Pki, TlsBrokerProcess, make_pki

from .test_cli import cli

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def mtls_broker(tmp_path_factory: pytest.TempPathFactory, pki: Pki) -> Iterator[TlsBrokerProcess]:
    """A broker whose SSL listener requires a client certificate signed by the test CA."""
    proc = TlsBrokerProcess(tmp_path_factory.mktemp("client-tls") / "data",
                            settings={**pki.mtls_settings(), "num.partitions": "2"})  # fmt: skip
    try:
        yield proc.start()
    finally:
        proc.close()


def tls(pki: Pki, *, client_cert: bool = True) -> dict[str, str]:
    settings = {"security_protocol": "SSL", "ssl_ca_location": str(pki.ca)}
    if client_cert:
        settings |= {"ssl_certificate_location": str(pki.client_cert), "ssl_key_location": str(pki.client_key)}
    return settings


async def test_transactional_produce_and_consume_over_mtls(mtls_broker, pki, anyio_backend) -> None:
    topic = f"client-tls-{anyio_backend}"
    async with Admin(mtls_broker.bootstrap, **tls(pki)) as admin:
        await admin.create_topic(topic, 2)
    async with Producer(mtls_broker.bootstrap, transactional_id=f"tls-{anyio_backend}", **tls(pki)) as producer:
        await producer.init_transactions()
        await producer.begin_transaction()
        for i in range(50):
            await producer.send(topic, b"v%d" % i, key=b"k%d" % i)
        await producer.commit_transaction()
    async with Consumer(mtls_broker.bootstrap, isolation_level="read_committed", auto_offset_reset="earliest",
                        **tls(pki)) as consumer:  # fmt: skip
        consumer.assign([TopicPartition(topic, p) for p in range(2)])
        values: set[bytes] = set()
        for _ in range(20):
            batch = await consumer.getmany(timeout_ms=300)
            values.update(record.value for records in batch.values() for record in records)
            if len(values) == 50:
                break
    assert values == {b"v%d" % i for i in range(50)}


async def test_a_client_without_certificate_is_refused(mtls_broker, pki, anyio_backend) -> None:
    with pytest.raises(KafkaError):
        async with Admin(mtls_broker.bootstrap, request_timeout_ms=3000, **tls(pki, client_cert=False)) as admin:
            await admin.list_topics()


async def test_the_broker_certificate_is_checked(mtls_broker, pki, anyio_backend) -> None:
    # Dialled as localhost (a DNS name of its certificate) it is accepted ...
    async with Admin(f"localhost:{mtls_broker.port}", **tls(pki)) as admin:
        assert isinstance(await admin.list_topics(), dict)
    # ... but not when it does not chain to ssl_ca_location.
    untrusting = {**tls(pki), "ssl_ca_location": str(pki.rogue_client_cert)}
    with pytest.raises(KafkaError):
        async with Admin(mtls_broker.bootstrap, request_timeout_ms=3000, **untrusting) as admin:
            await admin.list_topics()


def test_security_settings_are_checked_when_the_client_is_made(pki, tmp_path: Path) -> None:
    assert client_ssl_context() is None
    assert client_ssl_context(security_protocol="SASL_PLAINTEXT") is None
    assert client_ssl_context(security_protocol="SSL", ssl_ca_location=str(pki.ca)) is not None
    assert client_ssl_context(security_protocol="SASL_SSL", ssl_ca_location=str(pki.ca)) is not None
    with pytest.raises(ConfigError, match="TLS"):
        client_ssl_context(security_protocol="TLS")
    with pytest.raises(ConfigError, match=r"ssl\.ca\.location"):
        Producer("127.0.0.1:9", security_protocol="SSL", ssl_ca_location=str(tmp_path / "missing.pem"))
    with pytest.raises(ConfigError, match="client certificate"):
        Consumer("127.0.0.1:9", security_protocol="SSL", ssl_ca_location=str(pki.ca),
                 ssl_certificate_location=str(pki.client_cert), ssl_key_location=str(pki.server_key))  # fmt: skip


def test_cli_tools_over_mtls_with_command_config(mtls_broker, pki, tmp_path: Path, capsys) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "# Kafka-style client properties\n"
        "security.protocol=SSL\n"
        f"ssl.ca.location={pki.ca}\n"
        f"ssl.certificate.location={pki.client_cert}\n"
        f"ssl.key.location={pki.client_key}\n"
    )
    common = ["-b", mtls_broker.bootstrap, "--command-config", str(config)]
    assert cli("topic", "create", "cli-tls", "--partitions", "1", *common) == (0, "created cli-tls\n")
    assert cli("produce", "cli-tls", "--transactional", "cli-tls", *common, stdin="one\ntwo\n")[0] == 0
    code, out = cli("consume", "cli-tls", "--from-beginning", "--count", "2", "--isolation", "read_committed",
                    *common)  # fmt: skip
    assert (code, out.splitlines()) == (0, ["one", "two"])
    # Without the client certificate the broker refuses the connection.
    config.write_text(f"security.protocol=SSL\nssl.ca.location={pki.ca}\n")
    capsys.readouterr()
    assert cli("topic", "list", *common)[0] == 1
    assert "KafkaConnectionError" in capsys.readouterr().err
    config.write_text("acks=all\n")
    assert cli("topic", "list", *common)[0] == 1
    assert "unsupported line 'acks=all'" in capsys.readouterr().err
