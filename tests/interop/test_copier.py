"""Interop: exactly-once consume-transform-produce with stock clients (``support/copier.py``) against a real broker.

The chaos test copies 10k records of a 3-partition topic while SIGKILLing the copier three times and the broker once
(restarted on the same data dir and port); a read_committed read of the output must then hold every transformed
input record exactly once and nothing else. The zombie test checks KIP-447 fencing end to end: a copier whose group
membership was taken over (same group.instance.id) cannot commit its transaction's offsets, and nothing it wrote
becomes visible. The long form is ``tests/torture/copier_torture.py``.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from support.broker import BrokerProcess
from support.copier import COPIERS, Abortable, Args, Fenced
from support.copier_harness import (
    PARTITIONS,
    Chaos,
    ChaosResult,
    exactly_once_problems,
    produce_input,
    read_committed,
    run_chaos,
)
from support.topics import create_topic_confluent

CLIENTS = sorted(COPIERS)


@pytest.mark.parametrize("client", CLIENTS)
def test_copier_is_exactly_once_through_copier_and_broker_kills(
    own_broker: BrokerProcess, tmp_path: Path, client: str
) -> None:
    result = run_chaos(own_broker, client, tmp_path, records=10000, copier_kills=3, broker_kills=1, seed=7)
    print(
        f"{client}: {result.records} records, {result.copier_kills} copier kills, {result.broker_kills} broker "
        f"kills, {result.copier_starts} copier starts, other exits {result.unexpected_exits}, "
        f"{result.aborted_records} aborted output records, {result.seconds:.1f}s"
    )
    assert result.copier_kills == 3 and result.broker_kills == 1
    assert exactly_once_problems(result) == []
    assert result.final_lines[-1] == "caught up after 0 records"  # the group's offsets cover the whole input


def test_exactly_once_check_notices_loss_duplicates_and_strangers() -> None:
    rows = [(0, b"k0", b"T:a", b"0:0"), (1, b"k1", b"T:b", b"1:0"), (2, b"k2", b"T:c", b"2:0")]
    good = ChaosResult(3, rows, list(reversed(rows)))
    assert exactly_once_problems(good) == []
    lost = ChaosResult(3, rows, rows[:2])
    assert len(exactly_once_problems(lost)) == 1 and "missing" in exactly_once_problems(lost)[0]
    doubled = ChaosResult(3, rows, [*rows, rows[0]])
    assert len(exactly_once_problems(doubled)) == 1 and "duplicated" in exactly_once_problems(doubled)[0]
    stranger = ChaosResult(3, rows, [*rows, (0, b"k9", b"T:z", b"0:9")])
    assert len(exactly_once_problems(stranger)) == 1 and "not from the input" in exactly_once_problems(stranger)[0]


@pytest.mark.parametrize("client", CLIENTS)
def test_zombie_copier_is_fenced_and_its_output_stays_invisible(
    broker: BrokerProcess | None, bootstrap: str, tmp_path: Path, client: str
) -> None:
    if broker is None:
        pytest.skip("needs the broker subprocess of this module")
    records = 300
    chaos = Chaos(broker, client, tmp_path, f"zombie-{client}", batch=100)
    create_topic_confluent(bootstrap, chaos.input, PARTITIONS)
    create_topic_confluent(bootstrap, chaos.output, PARTITIONS)
    input_rows = produce_input(bootstrap, chaos.input, records)
    args = Args(
        client=client,
        bootstrap=bootstrap,
        group=f"{chaos.tag}-group",
        input=chaos.input,
        output=chaos.output,
        transactional_id=f"{chaos.tag}-zombie-txn",  # its own id: only the group generation can fence it
        instance_id=f"{chaos.tag}-copier",
        batch=100,
        session_ms=6000,
        idle_s=1.0,
    )
    zombie = COPIERS[client](args)
    try:
        batch: list = []
        end = time.monotonic() + 30
        while not batch:
            assert time.monotonic() < end, "the zombie never received records"
            batch = zombie.poll()
        # A successor with the same group.instance.id takes over the membership and copies everything.
        successor = chaos.start_copier(idle_s=1.0)
        assert successor.wait(60) == 0, chaos.log_tail()
        with pytest.raises((Fenced, Abortable)) as failure:
            zombie.copy(batch)  # produce, then TxnOffsetCommit with the old member id: refused
        refusal = str(failure.value)
        if client == "oncelog":
            # The bundled client has no static membership (tests/support/copier.py): its successor joins as a new
            # member, and the zombie's TxnOffsetCommit is refused for its stale member id, as Kafka refuses it.
            assert "UNKNOWN_MEMBER_ID" in refusal or "ILLEGAL_GENERATION" in refusal, refusal
        else:
            assert "fenced" in refusal.lower() or "FENCED_INSTANCE_ID" in refusal
    finally:
        with contextlib.suppress(Exception):  # a fenced client may not close cleanly; what matters is below
            zombie.close()
    # Whatever the zombie's producer left open is aborted by the next producer with its transactional id.
    cleanup = Producer({"bootstrap.servers": bootstrap, "transactional.id": args.transactional_id})
    cleanup.init_transactions(15)
    del cleanup
    result = ChaosResult(records, input_rows, read_committed(bootstrap, chaos.output))
    assert exactly_once_problems(result) == []
