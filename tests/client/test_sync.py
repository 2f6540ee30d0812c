"""The blocking facade (oncelog.client.sync), with its event loop on either backend."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from oncelog.client import (
    AbortableTransactionError,
    ConfigError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    TopicPartition,
    TransactionAbortedError,
    TxnState,
    sync,
)

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


BACKENDS = pytest.mark.parametrize("backend", ["asyncio", "trio"])


def count_portal_calls(client: Any) -> list[int]:
    """Count the facade's blocking calls into its event-loop thread from now on (``calls[0]``)."""
    calls = [0]
    call = client._portal.call

    def counting(*args: Any, **kw: Any) -> Any:
        calls[0] += 1
        return call(*args, **kw)

    client._portal.call = counting
    return calls


def read_all(bootstrap_servers: str, topic: str, partitions: int, n: int, **kw: Any) -> list[Any]:
    with sync.Consumer(bootstrap_servers, auto_offset_reset="earliest", **kw) as c:
        c.assign([TopicPartition(topic, p) for p in range(partitions)])
        records = []
        while len(records) < n:
            batch = c.getmany(timeout_ms=2000)
            assert batch, f"only {len(records)} of {n} records"
            records.extend(r for rs in batch.values() for r in rs)
        assert c.getmany(timeout_ms=200) == {}
    return records


@BACKENDS
def test_send_hands_records_over_without_a_blocking_call_each(
    bootstrap_servers: str, new_topic: Callable[..., str], backend: str
) -> None:
    topic = new_topic("sync-bulk", 2)
    n = 3 * sync.HANDOFF_MAX_RECORDS  # past the queue's bound: send also waits for room
    with sync.Producer(bootstrap_servers, linger_ms=20, backend=backend) as p:
        p.send(topic, b"first").get(10)  # fetches the topic's metadata
        calls = count_portal_calls(p)
        handles = [p.send(topic, b"%d" % i, key=b"%d" % (i % 7)) for i in range(n)]
        assert calls[0] == 0  # no blocking call per record: they cross in bulk
        p.flush()
        assert calls[0] == 1
        assert all(h.done() for h in handles)
        metas = [h.get(0) for h in handles]
    by_partition: dict[int, list[int]] = {}
    for meta in metas:
        by_partition.setdefault(meta.partition, []).append(meta.offset)
    assert all(offsets == sorted(offsets) for offsets in by_partition.values())
    assert len(read_all(bootstrap_servers, topic, 2, n + 1)) == n + 1


@BACKENDS
def test_concurrent_senders_keep_order_and_flush_waits_for_each(
    bootstrap_servers: str, new_topic: Callable[..., str], backend: str
) -> None:
    topic = new_topic("sync-threads", 3)
    threads, per_thread = 4, 2500
    errors: list[BaseException] = []
    with sync.Producer(bootstrap_servers, linger_ms=5, batch_size=4096, backend=backend) as p:
        p.send(topic, b"warm-up", partition=0).get(10)
        start = threading.Barrier(threads)

        def sender(t: int) -> None:
            try:
                start.wait()
                handles = [p.send(topic, f"{t}:{i}".encode(), key=f"k{t}".encode()) for i in range(per_thread)]
                p.flush()  # while the other threads still send
                assert all(h.done() for h in handles)
                offsets = [h.get(0).offset for h in handles]
                assert offsets == sorted(offsets)
                assert len({h.get(0).partition for h in handles}) == 1  # one key, one partition
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=sender, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(120)
        assert not errors, errors
    records = read_all(bootstrap_servers, topic, 3, threads * per_thread + 1)
    seen: dict[str, list[int]] = {}
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        if r.value != b"warm-up":
            t, i = r.value.decode().split(":")
            seen.setdefault(t, []).append(int(i))
    assert seen == {str(t): list(range(per_thread)) for t in range(threads)}  # each thread's records, in order


@BACKENDS
def test_send_errors_reach_the_caller(bootstrap_servers: str, new_topic: Callable[..., str], backend: str) -> None:
    topic = new_topic("sync-errors", 2)

    def partitioner(topic: str, key: bytes | None, count: int) -> int:
        if key == b"bad":
            raise ValueError("no partition for bad")
        return 0

    with sync.Producer(bootstrap_servers, partitioner=partitioner, backend=backend) as p:
        with pytest.raises(KafkaError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            p.send(topic, b"x", partition=2)  # metadata not cached yet: the async send raises it
        ok = p.send(topic, b"ok")
        with pytest.raises(KafkaError, match="UNKNOWN_TOPIC_OR_PARTITION"):
            p.send(topic, b"x", partition=2)  # cached now: raised on the caller's thread
        with pytest.raises(TypeError, match="bytes, str or None"):
            p.send(topic, 42)
        with pytest.raises(TypeError, match="bytes, str or None"):
            p.send(topic, b"x", headers=[("h", 1.5)])
        with pytest.raises(KafkaError, match=r"MESSAGE_TOO_LARGE.*max\.request\.size"):
            p.send(topic, b"x" * 1_048_576)  # with the batch header, over max.request.size (Kafka's 1 MiB)
        bad = p.send(topic, b"x", key=b"bad")  # the partitioner runs on the loop: its error fails the handle
        after = p.send(topic, b"after")
        with pytest.raises(ValueError, match="no partition for bad"):
            bad.get(10)
        assert bad.done()
        assert after.get(10).offset == ok.get(10).offset + 1
    with sync.Producer(bootstrap_servers, max_request_size=4_000_000, backend=backend) as p:
        too_large = p.send(topic, b"x" * 2_000_000, partition=1)  # now the broker refuses it
        with pytest.raises(KafkaError, match="MESSAGE_TOO_LARGE"):
            too_large.get(30)
    with pytest.raises(IllegalStateError):
        p.send(topic, b"closed")


def test_send_blocks_for_room_at_most_max_block_ms(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic("sync-block", 1)
    with sync.Producer(bootstrap_servers, max_block_ms=300) as p:
        p.send(topic, b"x").get(10)
        busy = threading.Event()

        def occupy_loop() -> None:
            busy.set()
            time.sleep(1.5)  # on the event-loop thread: nothing drains the hand-off queue meanwhile

        blocker = threading.Thread(target=p._portal.call, args=(occupy_loop,))
        blocker.start()
        assert busy.wait(10)
        handles = [p.send(topic, b"x") for _ in range(sync.HANDOFF_MAX_RECORDS)]
        with pytest.raises(KafkaTimeoutError, match=r"max\.block\.ms"):
            p.send(topic, b"one too many")
        blocker.join()
        p.flush()
        assert all(h.get(0).partition == 0 for h in handles)


@BACKENDS
def test_transactions_see_every_record_sent_before(
    bootstrap_servers: str, new_topic: Callable[..., str], backend: str
) -> None:
    topic = new_topic("sync-txn", 2)
    group = fresh_name("sync-txn-group")
    n = 2 * sync.HANDOFF_MAX_RECORDS
    # Linger long and batches large: nothing goes out before commit or abort (which send or drop it all).
    config = {"linger_ms": 60_000, "delivery_timeout_ms": 120_000, "batch_size": 1 << 20}
    with sync.Producer(bootstrap_servers, transactional_id=fresh_name("tid"), backend=backend, **config) as p:
        p.init_transactions()
        p.begin_transaction()
        aborted = [p.send(topic, b"aborted", partition=i % 2) for i in range(n)]
        p.abort_transaction()  # drops every record handed over before it
        for h in aborted:
            assert h.done()
            with pytest.raises(TransactionAbortedError):
                h.get(0)
        p.begin_transaction()
        errors: list[BaseException] = []

        def sender(t: int) -> None:
            try:
                for i in range(n):
                    p.send(topic, f"{t}:{i}".encode(), partition=t)
            except BaseException as exc:
                errors.append(exc)

        workers = [threading.Thread(target=sender, args=(t,)) for t in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join(60)
        assert not errors
        p.send_offsets_to_transaction({TopicPartition(topic, 0): 7}, group)
        p.commit_transaction()  # commits all 2n records: none is left in the hand-off queue
        with pytest.raises(IllegalStateError, match="begin_transaction"):
            p.send(topic, b"outside a transaction")  # raised on the caller's thread, as the async send raises it
    committed = read_all(bootstrap_servers, topic, 2, 2 * n, isolation_level="read_committed")
    assert sorted(r.value for r in committed) == sorted(f"{t}:{i}".encode() for t in range(2) for i in range(n))
    with sync.Consumer(bootstrap_servers, group_id=group, backend=backend) as c:
        c.assign([TopicPartition(topic, 0)])
        assert c.committed(TopicPartition(topic, 0)) == 7


@BACKENDS
def test_iteration_fetches_in_bulk_and_keeps_positions_exact(
    bootstrap_servers: str, new_topic: Callable[..., str], backend: str
) -> None:
    topic = new_topic("sync-iter", 1)
    tp = TopicPartition(topic, 0)
    with sync.Producer(bootstrap_servers, backend=backend) as p:
        for i in range(3000):
            p.send(topic, b"%d" % i, partition=0)
        p.flush()
    with sync.Consumer(bootstrap_servers, auto_offset_reset="earliest", max_poll_records=500, backend=backend) as c:
        c.assign([tp])
        calls = count_portal_calls(c)
        values = []
        for record in c:
            values.append(int(record.value))
            if len(values) == 1234:
                break
        assert values == list(range(1234))
        assert calls[0] <= 10  # a poll per max.poll.records records at most, plus empty fetches
        assert c.position(tp) == 1234  # exactly past the records returned
        rest = c.getmany(timeout_ms=1000, max_records=5000)[tp]
        assert rest[0].offset == 1234
