"""The CLI behaves as Kafka's tools: ``topic create`` takes the broker's defaults, ``group describe`` prints
kafka-consumer-groups.sh's lag table, ``group list --state`` its state column; SIGINT / SIGTERM end every command
quietly with a summary line."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from confluent_kafka import Consumer as ConfluentConsumer
from oncelog.client.cli import EXIT_INTERRUPTED
from oncelog.client.group_lag import COLUMNS

from .conftest import fresh_name
from .test_cli import cli

ONCELOG = str(Path(sys.executable).with_name("oncelog"))


def test_topic_create_takes_the_brokers_defaults(bootstrap_servers: str) -> None:
    """The client tests' broker runs with num.partitions=3: kafka-topics.sh's CreateTopics with -1 gets 3."""
    name = fresh_name("cli-defaults")
    assert cli("topic", "create", name, "-b", bootstrap_servers) == (0, f"created {name}\n")
    assert (
        cli("topic", "describe", name, "-b", bootstrap_servers)[1].splitlines()[0]
        == f"{name}\tpartitions=3\treplication_factor=1"
    )


def test_group_describe_prints_the_lag_table(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    b = ["-b", bootstrap_servers]
    topic = new_topic("cli-lag", 2)
    group = fresh_name("cli-lag-g")
    cli("produce", topic, "--partition", "0", *b, stdin="a\nb\nc\nd\ne\n")
    cli("produce", topic, "--partition", "1", *b, stdin="x\ny\n")
    assert cli("consume", topic, "--group", group, "--partition", "0", "--from-beginning", "--count", "3", *b)[0] == 0
    code, out = cli("group", "describe", group, "--topic", topic, *b)
    assert code == 0
    table = [line.split() for line in out.splitlines()]
    assert table == [
        list(COLUMNS),
        [group, topic, "0", "3", "5", "2", "-", "-", "-"],  # committed 3 of 5
        [group, topic, "1", "-", "2", "-", "-", "-", "-"],  # never committed
    ]
    # Columns line up: every cell starts where its heading does.
    header = out.splitlines()[0]
    starts = [header.index(name) for name in COLUMNS]
    for line in out.splitlines()[1:]:
        assert all(line[start - 1] == " " for start in starts[1:]) and line[starts[3]] != " "

    # An active member: its partitions carry its member id, host and client id.
    member = ConfluentConsumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": group,
            "client.id": "lag-test",
            "enable.auto.commit": False,
        }
    )
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(member.assignment()) < 2:
            member.poll(0.2)
            assert time.monotonic() < deadline, "no assignment"
        code, out = cli("group", "describe", group, "--json", *b)
        rows = json.loads(out)
        assert [(r["partition"], r["current_offset"], r["log_end_offset"], r["lag"]) for r in rows] == [
            (0, 3, 5, 2),
            (1, None, 2, None),
        ]
        assert {r["client_id"] for r in rows} == {"lag-test"}
        assert all(r["consumer_id"].startswith("lag-test-") and r["host"] for r in rows)
    finally:
        member.close()


def test_group_list_with_states(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    b = ["-b", bootstrap_servers]
    topic = new_topic("cli-state", 1)
    group = fresh_name("cli-state-g")
    cli("produce", topic, *b, stdin="a\n")
    assert cli("consume", topic, "--group", group, "--from-beginning", "--count", "1", *b)[0] == 0
    assert group in cli("group", "list", *b)[1].splitlines()
    code, out = cli("group", "list", "--state", *b)
    lines = [line.split() for line in out.splitlines()]
    assert code == 0 and lines[0] == ["GROUP", "STATE"] and [group, "Empty"] in lines
    assert [group, "Empty"] in [line.split() for line in cli("group", "list", "--state", "Empty", *b)[1].splitlines()]
    assert group not in cli("group", "list", "--state", "Stable", *b)[1]


def spawn(*args: str, stdin: int | None = subprocess.DEVNULL) -> subprocess.Popen[str]:
    return subprocess.Popen([ONCELOG, *args], stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def stop(proc: subprocess.Popen[str], signum: int) -> tuple[int, str, str]:
    """Signal ``proc`` and wait for it to end, its stdin still open (as a terminal's would be)."""
    proc.send_signal(signum)
    try:
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stdout is not None and proc.stderr is not None
    out, err = getattr(proc, "_seen", "") + proc.stdout.read(), proc.stderr.read()
    for stream in (proc.stdin, proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    return proc.returncode, out, err


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


def test_interrupted_consume_commits_and_exits_zero(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    b = ["-b", bootstrap_servers]
    topic = new_topic("cli-sigint", 1)
    group = fresh_name("cli-sigint-g")
    cli("produce", topic, *b, stdin="a\nb\nc\n")
    proc = spawn("consume", topic, "--group", group, "--from-beginning", *b)
    wait_for(lambda: _printed_three_lines(proc), "the consumer never started")
    code, out, err = stop(proc, signal.SIGINT)
    assert (code, out, err) == (0, "a\nb\nc\n", "oncelog consume: stopped by SIGINT; 3 records consumed\n")
    rows = json.loads(cli("group", "describe", group, "--json", *b)[1])
    assert [(r["current_offset"], r["lag"]) for r in rows] == [(3, 0)]


def _printed_three_lines(proc: subprocess.Popen[str]) -> bool:
    """True once the consumer printed its three records (read them off its stdout pipe as they come)."""
    assert proc.stdout is not None
    got = getattr(proc, "_seen", "")
    while select.select([proc.stdout], [], [], 0)[0]:
        chunk = os.read(proc.stdout.fileno(), 4096).decode()
        if not chunk:
            break
        got += chunk
    proc._seen = got  # type: ignore[attr-defined]
    return got.count("\n") >= 3


def test_interrupted_produce_and_copy_exit_130_with_a_summary(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    b = ["-b", bootstrap_servers]
    topic, copy_to = new_topic("cli-sigterm", 1), new_topic("cli-sigterm-out", 1)
    producer = spawn("produce", topic, *b, stdin=subprocess.PIPE)
    assert producer.stdin is not None
    producer.stdin.write("one\ntwo\n")
    producer.stdin.flush()  # and keep stdin open: produce waits for more lines
    wait_for(
        lambda: (
            '"one"' in cli("consume", topic, "--from-beginning", "--idle-timeout-ms", "300", "--json", *b)[1]
            and '"two"' in cli("consume", topic, "--from-beginning", "--idle-timeout-ms", "300", "--json", *b)[1]
        ),
        "the produced records never arrived",
    )
    code, out, err = stop(producer, signal.SIGTERM)
    assert (code, err) == (EXIT_INTERRUPTED, "oncelog produce: stopped by SIGTERM; 2 records sent, 2 acknowledged\n")

    copier = spawn("copy", topic, copy_to, "--idle-timeout-ms", "600000", *b)
    wait_for(
        lambda: cli("consume", copy_to, "--from-beginning", "--idle-timeout-ms", "300", *b)[1] == "one\ntwo\n",
        "the copy never committed",
    )
    code, out, err = stop(copier, signal.SIGINT)
    assert (code, out) == (EXIT_INTERRUPTED, "")
    assert err == "oncelog copy: stopped by SIGINT; 2 records read, 2 written (committed transactions)\n"


def test_produce_from_a_pipe_splits_lines_across_reads(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    """A pipe is read as its data comes: a line split between two reads, CRLF and a last line without a newline."""
    b = ["-b", bootstrap_servers]
    topic = new_topic("cli-pipe", 1)
    producer = spawn("produce", topic, *b, stdin=subprocess.PIPE)
    assert producer.stdin is not None
    for piece in ("on", "e\r", "\ntwo\n", "three"):
        producer.stdin.write(piece)
        producer.stdin.flush()
        time.sleep(0.1)
    producer.stdin.close()
    assert producer.wait(30) == 0
    assert cli("consume", topic, "--from-beginning", "--count", "3", *b)[1] == "one\ntwo\nthree\n"
    for stream in (producer.stdout, producer.stderr):
        if stream is not None:
            stream.close()
