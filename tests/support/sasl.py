"""A broker with a PLAINTEXT and a SASL_PLAINTEXT listener (PLAIN users from a JAAS config, SCRAM-SHA-256/512
enabled) for the SASL interop tests, and the client settings that reach it."""

from __future__ import annotations

from pathlib import Path

from .broker import BrokerProcess

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
PLAIN_JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(
    f'user_{name}="{password}"' for name, password in PLAIN_USERS.items()
) + ";"
SASL_SETTINGS = {
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "1000",
}
LISTENERS = ("PLAINTEXT", "SASL_PLAINTEXT")


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
