"""Hanging transactions: a real one (the coordinator's state deleted under a stopped broker), found by
``Admin.find_hanging_transactions`` / ``oncelog txn list`` and cleared by ``oncelog txn abort``; and the
transactions that must not be reported (ongoing, committed, or ending between the two looks)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from oncelog.client import sync
from oncelog.client.admin import Admin, TransactionDescription, coordinator_has_open
from oncelog.client.producer import Producer
from oncelog.client.types import TopicPartition
from support.broker import BrokerProcess

from .conftest import fresh_name
from .test_cli import cli


def hanging_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("hanging\t")]


@pytest.fixture
def own_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    """A broker this test may stop, tamper with and restart."""
    proc = BrokerProcess(tmp_path / "data", settings={"num.partitions": 1})
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


def make_hanging(broker: BrokerProcess, topic: str, partition: int) -> tuple[int, int]:
    """Leave a flushed, open transaction on ``topic``-``partition``, then make its coordinator forget it (stop the
    broker, delete every ``__transaction_state`` partition, start again). Returns (producer id, epoch)."""
    with sync.Producer(broker.bootstrap, transactional_id=f"tid-{topic}") as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"hang", partition=partition)
        p.flush()
        pid, epoch = p.producer_id_and_epoch
        # Before the coordinator forgets it, the open transaction is not hanging.
        code, out = cli("txn", "list", "-b", broker.bootstrap)
        assert code == 0 and f"tid-{topic}\tproducer_id={pid}\tstate=Ongoing" in out.splitlines()
        assert hanging_lines(out) == []
    # Closing a producer does not end its transaction.
    broker.stop()
    state_dirs = list(broker.data_dir.glob("__transaction_state-*"))
    assert state_dirs
    for d in state_dirs:
        shutil.rmtree(d)
    broker.start()
    return pid, epoch


def test_hanging_transaction_listed_blocks_lso_and_is_aborted(own_broker: BrokerProcess) -> None:
    b = ["-b", own_broker.bootstrap]
    topic, other = fresh_name("hang"), fresh_name("hang-other")
    assert cli("topic", "create", topic, "--partitions", "2", *b)[0] == 0
    assert cli("topic", "create", other, *b)[0] == 0
    assert cli("produce", topic, "--partition", "1", *b, stdin="before\n")[0] == 0  # offset 0
    pid, epoch = make_hanging(own_broker, topic, 1)  # offset 1
    assert cli("produce", topic, "--partition", "1", *b, stdin="after\n")[0] == 0  # offset 2

    code, out = cli("txn", "list", *b)
    assert code == 0
    assert f"tid-{topic}" not in out  # the coordinator has forgotten it
    [line] = hanging_lines(out)
    fields = line.split("\t")
    assert fields[:6] == [
        "hanging",
        f"{topic}-1",
        f"producer_id={pid}",
        f"producer_epoch={epoch}",
        "coordinator_epoch=-1",
        "start_offset=1",
    ]
    assert fields[6].startswith("last_timestamp=") and int(fields[6].split("=")[1]) > 0
    assert cli("txn", "list", "--hanging", *b) == (0, line + "\n")
    assert cli("txn", "list", "--hanging", "--topic", topic, *b) == (0, line + "\n")
    assert cli("txn", "list", "--hanging", "--topic", other, *b) == (0, "")
    assert cli("txn", "list", "--hanging", "--topic", fresh_name("missing"), *b)[0] == 1

    with sync.Admin(own_broker.bootstrap) as admin:
        [h] = admin.find_hanging_transactions()
        assert (h.topic_partition, h.producer_id, h.current_txn_start_offset) == (TopicPartition(topic, 1), pid, 1)

    read_committed = (
        "consume",
        topic,
        "--partition",
        "1",
        "--from-beginning",
        "--isolation",
        "read_committed",
        "--idle-timeout-ms",
        "300",
        *b,
    )
    assert cli(*read_committed) == (0, "before\n")  # the LSO is stuck at the hanging transaction's start

    pid_from_line = fields[2].split("=")[1]
    code, out = cli("txn", "abort", "--topic", topic, "--partition", "1", "--producer-id", pid_from_line, *b)
    assert code == 0 and out.startswith(f"aborted producer {pid}")
    assert hanging_lines(cli("txn", "list", *b)[1]) == []
    assert cli(*read_committed) == (0, "before\nafter\n")


def test_ongoing_and_committed_transactions_are_not_hanging(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic("not-hang", 1)
    tp = TopicPartition(topic, 0)
    with sync.Producer(bootstrap_servers, transactional_id=f"done-{topic}") as done:
        done.init_transactions()
        done.begin_transaction()
        done.send(topic, b"committed", partition=0)
        done.commit_transaction()
    with (
        sync.Producer(bootstrap_servers, transactional_id=f"open-{topic}") as ongoing,
        sync.Admin(bootstrap_servers) as admin,
    ):
        ongoing.init_transactions()
        ongoing.begin_transaction()
        ongoing.send(topic, b"open", partition=0)
        ongoing.flush()
        pid, _ = ongoing.producer_id_and_epoch
        states = {s.producer_id: s.current_txn_start_offset for s in admin.describe_producers([tp])[tp]}
        assert len(states) == 2 and states[pid] == 2  # committed one closed (offsets 0 + marker 1), this one open
        assert admin.find_hanging_transactions([topic]) == []
        code, out = cli("txn", "list", "-b", bootstrap_servers)
        assert code == 0 and f"open-{topic}\tproducer_id={pid}\tstate=Ongoing" in out.splitlines()
        assert not [line for line in hanging_lines(out) if line.split("\t")[1].startswith(f"{topic}-")]
        ongoing.abort_transaction()


@pytest.mark.anyio
async def test_transaction_ending_between_the_looks_is_not_reported(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    """The transaction commits after the first DescribeProducers: the coordinator then calls it CompleteCommit
    (a candidate), but the second DescribeProducers shows it closed, so nothing is reported."""
    topic = new_topic("race", 1)
    tp = TopicPartition(topic, 0)
    async with (
        Producer(bootstrap_servers, transactional_id=f"race-{topic}") as producer,
        Admin(bootstrap_servers) as admin,
        Admin(bootstrap_servers) as watcher,
    ):
        await producer.init_transactions()
        await producer.begin_transaction()
        await producer.send(topic, b"x", partition=0)
        await producer.flush()
        real_list, real_describe = admin.list_transactions, admin.describe_producers
        looks: list[dict[TopicPartition, Any]] = []

        async def describe_producers(tps: Any) -> Any:
            looks.append(await real_describe(tps))
            return looks[-1]

        async def commit_then_list(**kw: Any) -> Any:
            await producer.commit_transaction()
            with anyio.fail_after(10):
                while any(s.current_txn_start_offset >= 0 for s in (await watcher.describe_producers([tp]))[tp]):
                    await anyio.sleep(0.02)  # Kafka writes markers after EndTxn answers; wait for them
            listed = await real_list(**kw)
            assert [t.state for t in listed] == ["CompleteCommit"]
            return listed

        admin.describe_producers = describe_producers  # type: ignore[method-assign]
        admin.list_transactions = commit_then_list  # type: ignore[method-assign]
        assert await admin.find_hanging_transactions([topic]) == []
        assert len(looks) == 2  # the candidate was re-checked
        assert looks[0][tp][0].current_txn_start_offset == 0 and looks[1][tp][0].current_txn_start_offset == -1


def test_coordinator_has_open_decision() -> None:
    tp = TopicPartition("t", 0)

    def desc(state: str = "Ongoing", pid: int = 7, parts: tuple[TopicPartition, ...] = (tp,)) -> Any:
        return TransactionDescription("tid", state, pid, 0, 60000, 0, list(parts))

    assert coordinator_has_open([desc()], 7, tp)
    for state in ("PrepareCommit", "PrepareAbort", "PrepareEpochFence"):
        assert coordinator_has_open([desc(state)], 7, tp)
    for state in ("Empty", "CompleteCommit", "CompleteAbort", "Dead"):
        assert not coordinator_has_open([desc(state)], 7, tp)
    assert not coordinator_has_open([], 7, tp)  # no transactional id has this producer id
    assert not coordinator_has_open([desc(pid=8)], 7, tp)  # the id moved on to another producer id
    assert not coordinator_has_open([desc(parts=(TopicPartition("t", 1),))], 7, tp)  # partition not in it
    assert coordinator_has_open([desc(pid=8), desc(parts=(TopicPartition("t", 1), tp))], 7, tp)
