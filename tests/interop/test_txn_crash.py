"""Crash consistency of commits: the broker dies (SIGKILL from a fault point) in the middle of a commit and is
restarted; the transaction then completes as decided and a read_committed consumer sees it whole."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException, Producer
from support.broker import BrokerProcess
from support.confluent_io import consume_all
from support.topics import create_topic_confluent

PARTITIONS = 3
RECORDS = 90


@pytest.mark.parametrize("fault", ["txn.after_prepare", "txn.after_first_marker", "txn.before_complete"])
def test_commit_interrupted_by_a_crash_completes_after_restart(tmp_path, fault: str) -> None:
    broker = BrokerProcess(tmp_path / "data", env={"ONCELOG_FAULTS": fault})
    try:
        broker.start()
        create_topic_confluent(broker.bootstrap, "crash", PARTITIONS)
        producer = Producer(
            {
                "bootstrap.servers": broker.bootstrap,
                "transactional.id": "crash-txn",
                "transaction.timeout.ms": 60000,
                "message.timeout.ms": 5000,
            }
        )
        producer.init_transactions(15)
        producer.begin_transaction()
        for i in range(RECORDS):
            producer.produce("crash", value=b"v%d" % i, key=b"k%d" % i, partition=i % PARTITIONS)
        producer.flush(15)
        with pytest.raises(KafkaException):
            producer.commit_transaction(3)
        assert broker.wait_exit(10) == -9  # the fault point killed it mid-commit

        broker.env = {}
        broker.start()
        consumed = consume_all(broker.bootstrap, "crash", PARTITIONS, RECORDS, **{"isolation.level": "read_committed"})
        assert sorted(c.value for c in consumed) == sorted(b"v%d" % i for i in range(RECORDS))
        # The id is usable again: a new producer initialises (fencing the old one) and commits.
        again = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "crash-txn"})
        again.init_transactions(15)
        again.begin_transaction()
        again.produce("crash", value=b"after", partition=0)
        again.commit_transaction(15)
        consumed = consume_all(
            broker.bootstrap, "crash", PARTITIONS, RECORDS + 1, **{"isolation.level": "read_committed"}
        )
        assert sum(1 for c in consumed if c.value == b"after") == 1
    finally:
        broker.close()
