"""The bundled client over SASL_PLAINTEXT: PLAIN and SCRAM-SHA-256/512 (librdkafka's setting names) against a broker
with a PLAINTEXT and a SASL_PLAINTEXT listener; a wrong password is an authentication error; bad settings are
refused before any I/O."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from oncelog.client import Admin, Consumer, Producer, TopicPartition
from oncelog.client.errors import ConfigError, SaslAuthenticationError
from oncelog.client.sasl import sasl_settings
from oncelog.client.security import connection_security
from oncelog.protocol import ErrorCode
from support.broker import BrokerProcess
from support.sasl import LOGINS, running_sasl_broker
from support.topics import create_topic_confluent

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_sasl_broker(tmp_path_factory.mktemp("client-sasl") / "data") as proc:
        yield proc


def _sasl(mechanism: str, user: str, password: str) -> dict[str, str]:
    return {
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": mechanism,
        "sasl_username": user,
        "sasl_password": password,
    }


@pytest.mark.parametrize(("mechanism", "user", "password"), LOGINS)
async def test_produce_consume_and_admin(sasl_broker: BrokerProcess, mechanism: str, user: str, password: str) -> None:
    bootstrap = sasl_broker.bootstrap_for("SASL_PLAINTEXT")
    topic = f"oc-sasl-{uuid.uuid4().hex[:8]}"
    create_topic_confluent(sasl_broker.bootstrap_for("PLAINTEXT"), topic, 1)
    conf = _sasl(mechanism, user, password)
    async with Producer(bootstrap, transactional_id=f"oc-{topic}", **conf) as producer:
        await producer.init_transactions()
        await producer.begin_transaction()
        for i in range(10):
            await producer.send(topic, f"v{i}", partition=0)
        await producer.commit_transaction()
    async with Consumer(bootstrap, isolation_level="read_committed", auto_offset_reset="earliest", **conf) as c:
        c.assign([TopicPartition(topic, 0)])
        values: list[bytes] = []
        for _ in range(50):
            values += [r.value for rs in (await c.getmany(timeout_ms=200)).values() for r in rs]
            if len(values) >= 10:
                break
    assert values == [f"v{i}".encode() for i in range(10)]
    async with Admin(bootstrap, **conf) as admin:
        assert topic in await admin.list_topics()


@pytest.mark.parametrize(("mechanism", "user"), [(m, u) for m, u, _ in LOGINS])
async def test_a_wrong_password_is_an_authentication_error(
    sasl_broker: BrokerProcess, mechanism: str, user: str
) -> None:
    with pytest.raises(SaslAuthenticationError) as error:
        async with Admin(sasl_broker.bootstrap_for("SASL_PLAINTEXT"), **_sasl(mechanism, user, "wrong")):
            pass
    assert error.value.code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert f"invalid credentials with SASL mechanism {mechanism}" in str(error.value)


async def test_a_mechanism_the_listener_lacks(tmp_path) -> None:
    proc = BrokerProcess(
        tmp_path / "data", listeners=("SASL_PLAINTEXT",), settings={"sasl.enabled.mechanisms": "SCRAM-SHA-512"}
    )
    with proc, pytest.raises(SaslAuthenticationError) as error:
        async with Admin(proc.bootstrap_for("SASL_PLAINTEXT"), **_sasl("SCRAM-SHA-256", "u", "p")):
            pass
    assert error.value.code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert "SCRAM-SHA-512" in str(error.value)


def test_settings_are_checked_before_any_io() -> None:
    assert sasl_settings() is None
    assert sasl_settings("SSL") is None  # TLS only: no SASL
    settings = sasl_settings("sasl_plaintext", "scram-sha-512", "u", "secret")
    assert settings is not None and settings.mechanism == "SCRAM-SHA-512" and "secret" not in repr(settings)
    assert connection_security(security_protocol="SASL_SSL", sasl_username="u", sasl_password="p").sasl is not None
    for bad in (
        {"security_protocol": "SASL"},
        {"security_protocol": "SASL_PLAINTEXT", "sasl_username": "u"},
        {"security_protocol": "SASL_SSL", "sasl_password": "p"},
        {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI", "sasl_username": "u", "sasl_password": "p"},
    ):
        with pytest.raises(ConfigError):
            connection_security(**bad)
    with pytest.raises(ConfigError):
        Producer("127.0.0.1:1", security_protocol="SASL_PLAINTEXT", sasl_mechanism="PLAIN")
