"""Interop: Apache Kafka's own command-line tools (the version ``java/pom.xml`` pins) against oncelog.

``kafka-topics``, ``kafka-configs``, ``kafka-console-producer`` / ``-consumer``, ``kafka-consumer-groups`` and
``kafka-transactions`` are run by the main classes their ``bin/*.sh`` scripts name, all in one JVM
(``support.java_programs.run_tools``), and each one's output is checked. A hanging transaction is made for real
(the coordinator's state deleted under a stopped broker, as ``tests/client/test_hanging.py`` does) so that
``find-hanging`` has something to find and ``abort`` something to clear.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from support.broker import BrokerProcess
from support.java_programs import ToolRun, run_tools
from support.topics import create_topic_confluent

TOPICS = "org.apache.kafka.tools.TopicCommand"
CONFIGS = "kafka.admin.ConfigCommand"
CONSOLE_PRODUCER = "org.apache.kafka.tools.ConsoleProducer"
CONSOLE_CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer"
GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"
TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand"
NODE_ID = "1"  # node.id's default


def transaction(bootstrap: str, transactional_id: str, topic: str, *, commit: bool | None) -> None:
    """One transaction of one record on ``topic``-0: committed, aborted, or (``commit=None``) left open."""
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
    producer.init_transactions(15)
    producer.begin_transaction()
    producer.produce(topic, b"in a transaction", partition=0)
    assert producer.flush(15) == 0
    if commit is True:
        producer.commit_transaction(15)
    elif commit is False:
        producer.abort_transaction(15)


@pytest.fixture(scope="module")
def tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, ToolRun]]]:
    """One broker with a hanging transaction on ``hang``-0 and a committed one (``tools-done``), and every tool's run
    against it; stopped after the module."""
    broker = BrokerProcess(tmp_path_factory.mktemp("tools") / "data", settings={"group.initial.rebalance.delay.ms": 0})
    try:
        broker.start()
        create_topic_confluent(broker.bootstrap, "hang", 1)
        transaction(broker.bootstrap, "tools-forgotten", "hang", commit=None)
        broker.stop()  # the coordinator forgets the open transaction: it hangs on hang-0
        for state in Path(broker.data_dir).glob("__transaction_state-*"):
            shutil.rmtree(state)
        broker.start()
        create_topic_confluent(broker.bootstrap, "done", 1)
        transaction(broker.bootstrap, "tools-done", "done", commit=True)
        b = ["--bootstrap-server", broker.bootstrap]
        runs = run_tools(
            [
                ("create", TOPICS, [*b, "--create", "--topic", "tt", "--partitions", "3", "--replication-factor", "1"]),
                ("create-again", TOPICS, [*b, "--create", "--topic", "tt", "--partitions", "3"]),
                ("describe", TOPICS, [*b, "--describe", "--topic", "tt"]),
                ("list", TOPICS, [*b, "--list"]),
                ("list-external", TOPICS, [*b, "--list", "--exclude-internal"]),
                (
                    "alter-config",
                    CONFIGS,
                    [
                        *b,
                        "--alter",
                        "--entity-type",
                        "topics",
                        "--entity-name",
                        "tt",
                        "--add-config",
                        "retention.ms=86400000,cleanup.policy=compact",
                    ],
                ),
                ("describe-config", CONFIGS, [*b, "--describe", "--entity-type", "topics", "--entity-name", "tt"]),
                (
                    "produce",
                    CONSOLE_PRODUCER,
                    [
                        *b,
                        "--topic",
                        "tt",
                        "--property",
                        "parse.key=true",
                        "--property",
                        "key.separator=:",
                        "stdin=k1:v1\\nk2:v2\\nk3:v3",
                    ],
                ),
                (
                    "consume",
                    CONSOLE_CONSUMER,
                    [
                        *b,
                        "--topic",
                        "tt",
                        "--from-beginning",
                        "--max-messages",
                        "3",
                        "--group",
                        "tools-g",
                        "--property",
                        "print.key=true",
                        "--timeout-ms",
                        "30000",
                    ],
                ),
                ("groups-describe", GROUPS, [*b, "--describe", "--group", "tools-g"]),
                ("groups-list", GROUPS, [*b, "--list"]),
                ("txn-list", TRANSACTIONS, [*b, "list"]),
                ("txn-describe", TRANSACTIONS, [*b, "describe", "--transactional-id", "tools-done"]),
                ("txn-producers", TRANSACTIONS, [*b, "describe-producers", "--topic", "hang", "--partition", "0"]),
                (
                    "find-hanging",
                    TRANSACTIONS,
                    [*b, "find-hanging", "--broker-id", NODE_ID, "--max-transaction-timeout", "0"],
                ),
                ("abort", TRANSACTIONS, [*b, "abort", "--topic", "hang", "--partition", "0", "--start-offset", "0"]),
                (
                    "find-hanging-after",
                    TRANSACTIONS,
                    [*b, "find-hanging", "--broker-id", NODE_ID, "--max-transaction-timeout", "0"],
                ),
            ]
        )
        yield broker.bootstrap, runs
    finally:
        broker.close()


def table(out: str) -> list[dict[str, str]]:
    """The rows of a tool's table as dicts: a header line, then rows; tab-separated columns (kafka-transactions,
    which pads and ends each with a tab) or space-aligned ones (kafka-consumer-groups)."""
    lines = [line for line in out.splitlines() if line.strip()]

    def cells(line: str) -> list[str]:
        return [cell.strip() for cell in line.rstrip("\t").split("\t")] if "\t" in lines[0] else line.split()

    header = cells(lines[0])
    return [dict(zip(header, cells(line), strict=True)) for line in lines[1:]]


def ok(runs: dict[str, ToolRun], label: str) -> ToolRun:
    run = runs[label]
    assert run.returncode == 0, f"{label} exited {run.returncode}:\n{run.stdout}\n{run.stderr}"
    return run


@pytest.fixture(scope="module")
def runs(tools: tuple[str, dict[str, ToolRun]]) -> dict[str, ToolRun]:
    return tools[1]


def test_kafka_topics_create_describe_list(runs: dict[str, ToolRun]) -> None:
    assert ok(runs, "create").stdout == "Created topic tt.\n"
    assert runs["create-again"].returncode == 1
    assert "Topic 'tt' already exists." in runs["create-again"].stdout
    described = ok(runs, "describe").stdout.splitlines()
    assert described[0].split("\t")[0] == "Topic: tt"
    assert "PartitionCount: 3" in described[0] and "ReplicationFactor: 1" in described[0]
    partitions = [line.split("\t") for line in described[1:]]
    assert [p[2] for p in partitions] == ["Partition: 0", "Partition: 1", "Partition: 2"]
    assert all(p[3:6] == ["Leader: 1", "Replicas: 1", "Isr: 1"] for p in partitions)
    listed = ok(runs, "list").stdout.split()
    assert {"tt", "hang", "done", "__transaction_state"} <= set(listed)
    external = ok(runs, "list-external").stdout.split()
    assert set(external) == set(listed) - {"__transaction_state", "__consumer_offsets"}


def test_kafka_configs_alter_and_describe(runs: dict[str, ToolRun]) -> None:
    assert ok(runs, "alter-config").stdout == "Completed updating config for topic tt.\n"
    lines = ok(runs, "describe-config").stdout.splitlines()
    assert lines[0] == "Dynamic configs for topic tt are:"
    dynamic = {line.split()[0] for line in lines[1:]}
    assert dynamic == {"cleanup.policy=compact", "retention.ms=86400000"}
    assert (
        "DYNAMIC_TOPIC_CONFIG:retention.ms=86400000" in lines[2]
        or "DYNAMIC_TOPIC_CONFIG:retention.ms=86400000" in (lines[1])
    )


def test_console_producer_then_consumer_in_a_group(runs: dict[str, ToolRun]) -> None:
    ok(runs, "produce")
    consumed = ok(runs, "consume")
    assert sorted(consumed.stdout.splitlines()) == ["k1\tv1", "k2\tv2", "k3\tv3"]
    assert "Processed a total of 3 messages" in consumed.stderr


def test_kafka_consumer_groups_describe_and_list(runs: dict[str, ToolRun]) -> None:
    assert "tools-g" in ok(runs, "groups-list").stdout.split()
    described = ok(runs, "groups-describe")
    rows = table(described.stdout)
    assert {row["PARTITION"] for row in rows} == {"0", "1", "2"}
    assert all(row["GROUP"] == "tools-g" and row["TOPIC"] == "tt" and row["LAG"] == "0" for row in rows)
    assert sum(int(row["CURRENT-OFFSET"]) for row in rows) == 3  # the console consumer committed on close
    assert all(row["CURRENT-OFFSET"] == row["LOG-END-OFFSET"] for row in rows)
    assert "Consumer group 'tools-g' has no active members." in described.stderr


def test_kafka_transactions_list_and_describe(runs: dict[str, ToolRun]) -> None:
    listed = {row["TransactionalId"]: row for row in table(ok(runs, "txn-list").stdout)}
    assert "tools-forgotten" not in listed  # its coordinator state was deleted
    assert listed["tools-done"]["TransactionState"] == "CompleteCommit"
    assert listed["tools-done"]["Coordinator"] == NODE_ID
    [described] = table(ok(runs, "txn-describe").stdout)
    assert described["TransactionalId"] == "tools-done"
    assert described["TransactionState"] == "CompleteCommit"
    assert described["ProducerId"] == listed["tools-done"]["ProducerId"]
    assert described["TransactionTimeoutMs"] == "60000"  # librdkafka's transaction.timeout.ms default
    [producer] = table(ok(runs, "txn-producers").stdout)
    assert producer["CurrentTransactionStartOffset"] == "0"


def test_kafka_transactions_find_hanging_and_abort(runs: dict[str, ToolRun], tools) -> None:
    [hanging] = table(ok(runs, "find-hanging").stdout)
    assert (hanging["Topic"], hanging["Partition"], hanging["StartOffset"]) == ("hang", "0", "0")
    [producer] = table(runs["txn-producers"].stdout)
    assert hanging["ProducerId"] == producer["ProducerId"]
    ok(runs, "abort")
    assert table(ok(runs, "find-hanging-after").stdout) == []
    # The abort marker was written: the last stable offset passed the record and its marker.
    bootstrap = tools[0]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    tp = TopicPartition("hang", 0)
    result = admin.list_offsets({tp: OffsetSpec.latest()}, isolation_level=IsolationLevel.READ_COMMITTED)
    assert result[tp].result(timeout=15).offset == 2
