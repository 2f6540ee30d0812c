"""A broker with a PLAINTEXT and a SASL_PLAINTEXT listener (PLAIN users from a JAAS config, SCRAM-SHA-256/512
enabled) for the SASL interop tests, and the client settings that reach it."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
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
#: How long one metadata request of ``authentication_errors`` waits, and then its poll for error callbacks.
AUTH_ATTEMPT_S = 0.2
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


def authentication_errors(conf: Mapping[str, str], deadline_s: float = 10.0) -> list[KafkaError]:
    """The errors librdkafka reports for a connection with ``conf`` (an admin client's metadata requests), as soon
    as any came (within ``deadline_s``); AssertionError if a metadata request succeeds. Short requests, repeated,
    rather than one long one: a request whose authentication failed is retried until its timeout, and the error
    arrives in well under a second."""
    errors: list[KafkaError] = []
    admin = AdminClient({**conf, "error_cb": errors.append})
    end = time.monotonic() + deadline_s
    while not errors and time.monotonic() < end:
        try:
            admin.list_topics(timeout=AUTH_ATTEMPT_S)
        except KafkaException:
            pass
        else:
            raise AssertionError("the metadata request succeeded")
        admin.poll(AUTH_ATTEMPT_S)  # error callbacks are served by poll()
    return errors
