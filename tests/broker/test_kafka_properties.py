"""Kafka's configuration files work unchanged: every Kafka broker property is applied with Kafka's meaning or
accepted and listed as not used; only a name Kafka does not have stops the start, with a suggestion."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from oncelog.broker.config import BrokerConfig, ConfigError, is_listener_property, known_property_names
from oncelog.broker.kafka_properties import MS_PER_HOUR, MS_PER_MINUTE, not_used_reason
from support.ports import can_connect, free_port

STOCK = Path(__file__).parent / "data" / "kafka-4-server.properties"


def config(**values: str) -> BrokerConfig:
    return BrokerConfig.from_sources({k.replace("_", "."): v for k, v in values.items()})


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, 7 * 24 * MS_PER_HOUR),
        ({"log.retention.hours": "1"}, MS_PER_HOUR),
        ({"log.retention.hours": "1", "log.retention.minutes": "5"}, 5 * MS_PER_MINUTE),
        ({"log.retention.hours": "1", "log.retention.minutes": "5", "log.retention.ms": "42"}, 42),
        ({"log.retention.minutes": "-1"}, -1),
    ],
)
def test_retention_time_follows_kafkas_precedence(values: dict[str, str], expected: int) -> None:
    assert BrokerConfig.from_sources(values).get_int("log.retention.ms") == expected


def test_precedence_holds_across_sources() -> None:
    """ms beats hours even when hours comes from a later source (--set after the file), as in Kafka."""
    merged = BrokerConfig.from_sources({"log.retention.ms": "1000"}, {"log.retention.hours": "2"})
    assert merged.get_int("log.retention.ms") == 1000


def test_aliases() -> None:
    c = config(log_roll_hours="2", broker_id="7", log_dir="/tmp/one", log_segment_delete_delay_ms="5")
    assert c.get_int("log.roll.ms") == 2 * MS_PER_HOUR
    assert c.get_int("node.id") == 7
    assert c.get_str("log.dirs") == "/tmp/one"
    assert c.get_int("file.delete.delay.ms") == 5
    assert BrokerConfig.from_sources({"log.dir": "/a", "log.dirs": "/b"}).get_str("log.dirs") == "/b"
    with pytest.raises(ConfigError, match=r"broker.id \(2\) must be equal to node.id \(1\)"):
        BrokerConfig.from_sources({"broker.id": "2", "node.id": "1"})
    with pytest.raises(ConfigError, match=r"log\.retention\.hours: Not a number"):
        BrokerConfig.from_sources({"log.retention.hours": "a week"})
    with pytest.raises(ConfigError, match="one directory"):
        BrokerConfig.from_sources({"log.dirs": "/a,/b"})


def test_unknown_name_is_an_error_with_a_suggestion() -> None:
    with pytest.raises(ConfigError) as raised:
        BrokerConfig.from_sources({"log.retention.hour": "1"})
    assert str(raised.value) == "unknown property 'log.retention.hour' (did you mean 'log.retention.hours'?)"
    with pytest.raises(ConfigError) as raised:
        BrokerConfig.from_sources({"num.network.thread": "3"})
    assert "did you mean 'num.network.threads'" in str(raised.value)
    with pytest.raises(ConfigError, match=r"^unknown property 'no.such.thing'$"):
        BrokerConfig.from_sources({"no.such.thing": "1"})


def test_kafka_properties_not_used_are_listed_with_their_reason() -> None:
    c = config(
        num_io_threads="8",
        num_network_threads="3",
        process_roles="broker,controller",
        num_replica_fetchers="1",
        zookeeper_connect="localhost:2181",
    )
    assert set(c.not_used) == {
        "num.io.threads",
        "num.network.threads",
        "process.roles",
        "num.replica.fetchers",
        "zookeeper.connect",
    }
    summary = c.not_used_summary()
    assert "num.io.threads, num.network.threads (thread pools" in summary
    assert "process.roles (KRaft" in summary
    assert "num.replica.fetchers (replication" in summary and "no throttles" in summary
    # Kafka's replication settings oncelog reads stay accepted (and applied).
    assert config(min_insync_replicas="2", default_replication_factor="1").get_int("min.insync.replicas") == 2
    assert config(offsets_topic_replication_factor="1").get_int("offsets.topic.replication.factor") == 1


def test_controller_listeners_are_not_opened() -> None:
    c = config(
        listeners="PLAINTEXT://:9092,CONTROLLER://:9093",
        advertised_listeners="PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
        controller_listener_names="CONTROLLER",
    )
    assert c.get_str("listeners") == "PLAINTEXT://:9092"
    assert c.get_str("advertised.listeners") == "PLAINTEXT://localhost:9092"


def test_kafkas_stock_server_properties_starts_the_broker(tmp_path: Path) -> None:
    """Kafka 4's config/server.properties with only its ports and log.dirs changed: the broker starts, warns once
    about what it does not use, and serves a Kafka client."""
    port, controller_port = free_port(), free_port()
    text = (
        STOCK.read_text()
        .replace(":9092", f":{port}")
        .replace(":9093", f":{controller_port}")
        .replace("/tmp/kraft-combined-logs", str(tmp_path / "kraft-combined-logs"))
    )
    properties = tmp_path / "server.properties"
    properties.write_text(text)
    oncelog = Path(sys.executable).with_name("oncelog")
    stderr_path = tmp_path / "stderr"
    with open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(
            [str(oncelog), "broker", "--config", str(properties)],
            stdin=subprocess.DEVNULL,
            stderr=stderr,
            cwd=tmp_path,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 30
        while not can_connect("127.0.0.1", port):
            assert proc.poll() is None, stderr_path.read_text()
            assert time.monotonic() < deadline, stderr_path.read_text()
            time.sleep(0.05)
        assert not can_connect("127.0.0.1", controller_port)  # the controller listener is not opened
        bootstrap = f"127.0.0.1:{port}"
        producer = Producer({"bootstrap.servers": bootstrap})
        for value in (b"one", b"two"):
            producer.produce("stock-config", value)
        assert producer.flush(30) == 0
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "stock", "auto.offset.reset": "earliest"})
        consumer.subscribe(["stock-config"])
        got: list[bytes] = []
        deadline = time.monotonic() + 30
        while len(got) < 2 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
        consumer.close()
        assert got == [b"one", b"two"]
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    assert code == 0
    log = stderr_path.read_text()
    warnings = [line for line in log.splitlines() if "not used by oncelog" in line]
    assert len(warnings) == 1, log
    for name in ("process.roles", "num.network.threads", "socket.send.buffer.bytes", "transaction.state.log.min.isr"):
        assert name in warnings[0]
    assert (tmp_path / "kraft-combined-logs").is_dir()
    assert os.listdir(tmp_path / "kraft-combined-logs")


def test_every_kafka_broker_property_name_is_accepted() -> None:
    """Each name of Kafka's broker config classes is read, aliased or listed as not used: none is an error."""
    names = [
        line.strip()
        for line in (STOCK.parent / "kafka-broker-property-names.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert len(names) > 250
    unknown = [name for name in names if name not in known_property_names() and not_used_reason(name) is None]
    assert not [name for name in unknown if not is_listener_property(name)]


def test_no_property_oncelog_applies_is_listed_as_not_used() -> None:
    """A property that gains a meaning in oncelog must leave NOT_USED, or the start-up warning would call it unused."""
    from oncelog.broker.config import PROPERTIES
    from oncelog.broker.kafka_properties import not_used_reason

    assert {name: not_used_reason(name) for name in PROPERTIES if not_used_reason(name) is not None} == {}
