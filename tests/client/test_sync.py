"""The blocking facade (oncelog.client.sync), with its event loop on either backend."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from oncelog.client import AbortableTransactionError, ConfigError, TopicPartition, TxnState, sync

from .conftest import fresh_name


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_blocking_round_trip(bootstrap_servers: str, new_topic: Callable[..., str], backend: str) -> None:
    topic = new_topic("sync", 2)
    before = threading.active_count()
    with sync.Producer(bootstrap_servers, transactional_id=f"tid-{topic}", backend=backend) as p:
        p.init_transactions()
        p.begin_transaction()
        handles = [p.send(topic, f"v{i}".encode(), key=b"k", partition=i % 2) for i in range(10)]
        p.commit_transaction()
        assert all(h.done() for h in handles)
        offsets = sorted((h.get(1).partition, h.get(1).offset) for h in handles)
        assert offsets == sorted((i % 2, i // 2) for i in range(10))
        p.begin_transaction()
        assert p.send_and_wait(topic, b"dropped", partition=0).offset == 6  # after the COMMIT marker
        p.abort_transaction()
        assert p.transaction_state is TxnState.READY
    with sync.Consumer(
        bootstrap_servers, isolation_level="read_committed", auto_offset_reset="earliest", backend=backend
    ) as c:
        c.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        values = []
        for record in c:
            values.append(record.value)
            if len(values) == 10:
                break
        assert sorted(values) == sorted(f"v{i}".encode() for i in range(10))
        assert c.getmany(timeout_ms=200) == {}
        # Past v0, v2 .. v8 (0-4), the COMMIT marker (5), the aborted record (6) and its ABORT marker (7).
        assert c.position(TopicPartition(topic, 0)) == 8
    with sync.Admin(bootstrap_servers, backend=backend) as a:
        assert a.list_topics()[topic] == 2
    assert threading.active_count() <= before  # every event-loop thread is gone


def test_blocking_errors_propagate(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    with pytest.raises(ConfigError):
        sync.Producer(bootstrap_servers, acks=1)
    topic = new_topic("sync-err", 1)
    with sync.Producer(bootstrap_servers, transactional_id=fresh_name("tid")) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"x", partition=0)
        with pytest.raises(Exception, match="UNKNOWN_TOPIC_OR_PARTITION"):
            p.send(topic, b"x", partition=5)
        p.commit_transaction()
        p.begin_transaction()
        with pytest.raises(AbortableTransactionError):
            p.send_offsets_to_transaction({TopicPartition(topic, 0): 1}, "")  # empty group id is invalid
        assert p.transaction_state is TxnState.ABORTABLE_ERROR
        p.abort_transaction()
