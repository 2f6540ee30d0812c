"""A broker with a PLAINTEXT and a SASL_PLAINTEXT listener (PLAIN users from a JAAS config, SCRAM-SHA-256/512
enabled) for the SASL interop tests, and the client settings that reach it."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from .broker import BrokerProcess

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    + " ".join(f'user_{name}="{password}"' for name, password in PLAIN_USERS.items())
    + ";"
)
SASL_SETTINGS = {
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}
LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT")
#: (mechanism, user, password) of one login per mechanism: PLAIN's from ``PLAIN_JAAS``, SCRAM's made with
#: ``add_scram_users``.
LOGINS = [
    ("PLAIN", "alice", "alice-secret"),
    ("SCRAM-SHA-256", "scram256", "s256-secret"),
    ("SCRAM-SHA-512", "scram512", "s512-secret"),
]
SCRAM = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}


def sasl_broker_process(data_dir: Path) -> BrokerProcess:
    return BrokerProcess(data_dir, settings=SASL_SETTINGS, listeners=LISTENERS)


def librdkafka_sasl(broker: BrokerProcess, mechanism: str, user: str, password: str) -> dict[str, str]:
    """librdkafka's settings for the SASL_PLAINTEXT listener."""
    return {
        "bootstrap.servers": broker.bootstrap_for("SASL_PLAINTEXT"),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": password,
    }


def add_scram_users(
    admin_conf: Mapping[str, str], logins: Sequence[tuple[str, str, str]] = LOGINS, iterations: int = 4096
) -> None:
    """Create the SCRAM users among ``logins`` with confluent-kafka's ``alter_user_scram_credentials`` (KIP-554)."""
    upserts = [
        UserScramCredentialUpsertion(user, ScramCredentialInfo(SCRAM[mechanism], iterations), password.encode())
        for mechanism, user, password in logins
        if mechanism in SCRAM
    ]
    admin = AdminClient(dict(admin_conf))  # kept until the futures are done: its end would cancel them
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(timeout=30)


@contextmanager
def running_sasl_broker(data_dir: Path, *, iterations: int = 4096) -> Iterator[BrokerProcess]:
    """``sasl_broker_process`` started, with the SCRAM users of ``LOGINS`` made (as the JAAS admin, over SASL)."""
    proc = sasl_broker_process(data_dir)
    try:
        proc.start()
        add_scram_users(librdkafka_sasl(proc, "PLAIN", "admin", PLAIN_USERS["admin"]), iterations=iterations)
        yield proc
    finally:
        proc.close()


def authentication_errors(conf: Mapping[str, str]) -> list[KafkaError]:
    """The errors librdkafka reports for a connection with ``conf`` (an admin client's metadata request), once any
    came (within 10 s)."""
    errors: list[KafkaError] = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    try:
        admin.list_topics(timeout=5)
    except Exception:
        pass
    else:
        raise AssertionError("the metadata request succeeded")
    for _ in range(20):  # error callbacks are served by poll()
        if errors:
            break
        admin.poll(0.5)
    return errors
