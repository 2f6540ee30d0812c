"""Interop: confluent-kafka (librdkafka) over SASL_PLAINTEXT with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512, next to a
PLAINTEXT listener on the same broker; SCRAM users come from AdminClient.alter_user_scram_credentials (KIP-554)."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from support.broker import BrokerProcess, BrokerStartError, default_command
from support.confluent_io import commit_then_abort, consume_all, produce_all
from support.dataset import check_roundtrip, make_records
from support.sasl import (
    LOGINS,
    PLAIN_USERS,
    authentication_errors,
    librdkafka_sasl,
    running_sasl_broker,
    sasl_broker_process,
)
from support.topics import create_topic_confluent

PARTITIONS = 2
DEADLINE_S = 30.0


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    with running_sasl_broker(tmp_path_factory.mktemp("sasl") / "data", iterations=8192) as proc:
        yield proc


def _topic(broker: BrokerProcess, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic_confluent(broker.bootstrap_for("PLAINTEXT"), name, PARTITIONS)
    return name


@pytest.mark.parametrize(("mechanism", "user", "password"), LOGINS)
def test_produce_and_consume(sasl_broker: BrokerProcess, mechanism: str, user: str, password: str) -> None:
    conf = librdkafka_sasl(sasl_broker, mechanism, user, password)
    topic = _topic(sasl_broker, f"sasl-{mechanism.lower()}")
    records = make_records(500, seed=len(mechanism))
    bootstrap = conf.pop("bootstrap.servers")
    delivered = produce_all(bootstrap, topic, records, **conf)
    consumed = consume_all(bootstrap, topic, PARTITIONS, len(records), **conf)
    check_roundtrip(records, delivered, consumed, num_partitions=PARTITIONS)


@pytest.mark.parametrize(("mechanism", "user", "password"), LOGINS)
def test_transaction(sasl_broker: BrokerProcess, mechanism: str, user: str, password: str) -> None:
    conf = librdkafka_sasl(sasl_broker, mechanism, user, password)
    topic = _topic(sasl_broker, f"sasl-txn-{mechanism.lower()}")
    assert commit_then_abort(conf, topic, PARTITIONS, 20) == sorted(b"committed-%d" % i for i in range(20))


@pytest.mark.parametrize(("mechanism", "user"), [(m, u) for m, u, _ in LOGINS])
def test_a_wrong_password_is_an_authentication_error(sasl_broker: BrokerProcess, mechanism: str, user: str) -> None:
    errors = authentication_errors(librdkafka_sasl(sasl_broker, mechanism, user, "wrong"))
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
    assert any("invalid credentials with SASL mechanism " + mechanism in e.str() for e in errors), errors


def test_each_listener_advertises_its_own_address(sasl_broker: BrokerProcess) -> None:
    plain = AdminClient({"bootstrap.servers": sasl_broker.bootstrap_for("PLAINTEXT")}).list_topics(timeout=10)
    assert [(b.host, b.port) for b in plain.brokers.values()] == [("127.0.0.1", sasl_broker.ports["PLAINTEXT"])]
    conf = librdkafka_sasl(sasl_broker, "PLAIN", "alice", "alice-secret")
    sasl = AdminClient(conf).list_topics(timeout=10)
    assert [(b.host, b.port) for b in sasl.brokers.values()] == [("127.0.0.1", sasl_broker.ports["SASL_PLAINTEXT"])]


def test_describe_and_delete_scram_credentials(sasl_broker: BrokerProcess) -> None:
    admin = AdminClient(librdkafka_sasl(sasl_broker, "PLAIN", "admin", "admin-secret"))
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    for future in admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("temp", info, b"temp-secret")]
    ).values():
        future.result(timeout=DEADLINE_S)
    described = admin.describe_user_scram_credentials(["temp"])["temp"].result(timeout=DEADLINE_S)
    assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
        (ScramMechanism.SCRAM_SHA_256, 4096)
    ]
    too_few = admin.alter_user_scram_credentials(
        [UserScramCredentialUpsertion("temp2", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1024), b"x")]
    )["temp2"]
    with pytest.raises(Exception) as error:
        too_few.result(timeout=DEADLINE_S)
    assert error.value.args[0].code() == KafkaError.UNACCEPTABLE_CREDENTIAL
    deleted = admin.alter_user_scram_credentials([UserScramCredentialDeletion("temp", ScramMechanism.SCRAM_SHA_256)])[
        "temp"
    ]
    deleted.result(timeout=DEADLINE_S)
    with pytest.raises(Exception) as error:
        admin.describe_user_scram_credentials(["temp"])["temp"].result(timeout=DEADLINE_S)
    assert error.value.args[0].code() == KafkaError.RESOURCE_NOT_FOUND


@pytest.mark.parametrize("hard", [False, True], ids=["sigterm", "sigkill"])
def test_credentials_survive_a_restart(tmp_path: Path, hard: bool) -> None:
    proc = sasl_broker_process(tmp_path / "data")
    try:
        proc.start()
        admin = AdminClient({"bootstrap.servers": proc.bootstrap_for("PLAINTEXT")})
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        futures = admin.alter_user_scram_credentials([UserScramCredentialUpsertion("dan", info, b"dan-secret")])
        futures["dan"].result(timeout=DEADLINE_S)
        proc.restart(hard=hard)  # SIGKILL right after the answer, or a clean stop
        conf = librdkafka_sasl(proc, "SCRAM-SHA-512", "dan", "dan-secret")
        metadata = AdminClient(conf).list_topics(timeout=10)
        assert [b.port for b in metadata.brokers.values()] == [proc.ports["SASL_PLAINTEXT"]]
    finally:
        proc.close()


def test_add_scram_command_gives_a_first_user(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    command = [
        *default_command()[:-1],
        "add-scram",
        "--data-dir",
        str(data_dir),
        "SCRAM-SHA-256=[name=ops,password=ops-secret,iterations=8192]",
    ]
    subprocess.run(command, check=True, timeout=DEADLINE_S, capture_output=True)
    assert "ops-secret" not in (data_dir / "scram-credentials.json").read_text()
    proc = sasl_broker_process(data_dir)
    try:
        proc.start()
        admin = AdminClient(librdkafka_sasl(proc, "SCRAM-SHA-256", "ops", "ops-secret"))
        described = admin.describe_user_scram_credentials(["ops"])["ops"].result(timeout=DEADLINE_S)
        assert [(i.mechanism, i.iterations) for i in described.scram_credential_infos] == [
            (ScramMechanism.SCRAM_SHA_256, 8192)
        ]
    finally:
        proc.close()


def test_kafkas_default_gssapi_refuses_to_start(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path / "data", listeners=("SASL_PLAINTEXT",))
    with pytest.raises(BrokerStartError) as error:
        proc.start()
    assert "sasl.enabled.mechanisms=GSSAPI" in str(error.value)
    proc.close()


def test_no_password_reaches_the_broker_log(sasl_broker: BrokerProcess) -> None:
    """Runs after the module's logins, good and bad. The harness's own ``==== start`` lines echo the command line
    (which holds the JAAS config); the broker's lines must not."""
    broker_lines = [
        line for line in sasl_broker.stderr_tail(10_000_000).splitlines() if not line.startswith("==== start")
    ]
    assert any("authentication_failed" in line for line in broker_lines)
    secrets = [*PLAIN_USERS.values(), *(password for _, _, password in LOGINS), "wrong"]
    leaked = [line for line in broker_lines for secret in secrets if secret in line]
    assert not leaked, leaked[:3]
