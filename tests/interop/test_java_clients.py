"""Interop: Apache Kafka's Java client (kafka-clients, the version ``java/pom.xml`` pins) against the broker under test.

One JVM run of ``java/src/main/java/oncelog/javacheck/ClientCheck.java`` exercises the producer (idempotent,
transactional), the consumer (read_committed, a group, ``sendOffsetsToTransaction``) and the admin client (topics,
configs, groups, ``listTransactions`` / ``describeTransactions`` / ``describeProducers`` / ``abortTransaction``) and
prints what it observed; this module asserts each observation, so the Java program decides nothing.

The same assertions hold against Apache Kafka 4.1.1: start ``support.kafka_peer.KafkaPeer`` and run this module with
``ONCELOG_TEST_BOOTSTRAP=<its bootstrap>`` (done by hand for issue 30: 6 passed).
"""

from __future__ import annotations

import itertools

import pytest
from support.java_programs import run_java

_runs = itertools.count()


@pytest.fixture(scope="module")
def observed(bootstrap: str) -> dict[str, str]:
    """The ``name -> value`` lines of one ClientCheck run (it must exit 0 and print ``done``)."""
    run = run_java("oncelog.javacheck.ClientCheck", [bootstrap, f"java-{next(_runs)}"])
    assert run.returncode == 0, f"ClientCheck exited {run.returncode}:\n{run.stdout}\n{run.stderr[-6000:]}"
    lines = dict(line.split("\t", 1) for line in run.stdout.splitlines() if "\t" in line)
    assert lines.get("done") == "true", run.stdout
    return lines


def test_admin_topics(observed: dict[str, str]) -> None:
    assert observed["topics.in.partitions"] == "2"
    assert observed["topics.listed"] == "true"
    assert observed["topics.create_again"] == "TopicExistsException"
    assert observed["topics.create_invalid"] == "InvalidTopicException"


def test_admin_incremental_alter_configs_read_back(observed: dict[str, str]) -> None:
    assert observed["configs.retention_ms"] == "123456"
    assert observed["configs.retention_ms.source"] == "DYNAMIC_TOPIC_CONFIG"


def test_idempotent_producer_in_order(observed: dict[str, str]) -> None:
    assert observed["idempotent.last_offset"] == "199"
    assert observed["idempotent.read"] == "200"
    assert observed["idempotent.in_order"] == "true"


def test_transactions_commit_and_abort(observed: dict[str, str]) -> None:
    assert observed["txn.read_committed"] == "10"
    assert observed["txn.read_committed.any_aborted"] == "false"
    assert observed["txn.read_uncommitted"] == "15"
    assert observed["txn.listed"] == "true"
    assert observed["txn.described.state"] == "CompleteAbort"
    assert observed["txn.described.partitions"] == "0"  # Kafka clears them once the markers are written


def test_group_copier_with_send_offsets_to_transaction(observed: dict[str, str]) -> None:
    assert observed["copier.copied"] == "50"
    assert observed["copier.out"] == "50"
    assert observed["copier.out.distinct"] == "50"
    assert observed["group.committed_sum"] == "50"  # 25 records on each of two partitions, committed in the txns
    assert observed["group.listed"] == "true"
    assert observed["group.state"] == "Stable"
    assert observed["group.members"] == "1"
    assert observed["group.assigned_partitions"] == "2"


def test_admin_abort_transaction_of_hanging_producer(observed: dict[str, str]) -> None:
    assert observed["hang.lso_before"] == "0"  # the open transaction holds the last stable offset
    assert observed["hang.producer.txn_start"] == "0"  # DescribeProducers names where it began
    assert observed["hang.lso_after"] == "2"  # the record and the abort marker
    assert observed["hang.read_committed"] == "0"
