"""The client's CLI commands, parsed by the real ``oncelog`` parser and run in-process (one also as a process)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from oncelog.broker.cli import build_parser
from oncelog.client.cli import run

from .conftest import fresh_name


def cli(*argv: str, stdin: str = "") -> tuple[int, str]:
    args = build_parser().parse_args(list(argv))
    out = io.StringIO()
    code = run(args, stdin=io.StringIO(stdin), stdout=out)
    return code, out.getvalue()


def test_topic_commands(bootstrap_servers: str) -> None:
    b = ["-b", bootstrap_servers]
    name = fresh_name("cli-topic")
    assert cli("topic", "create", name, "--partitions", "2", "--config", "retention.ms=1000", *b) == (
        0,
        f"created {name}\n",
    )
    code, _ = cli("topic", "create", name, *b)
    assert code == 1  # TOPIC_ALREADY_EXISTS
    code, out = cli("topic", "list", *b)
    assert code == 0 and name in out.split()
    code, out = cli("topic", "describe", name, *b)
    assert code == 0 and out.splitlines() == [
        f"{name}\tpartitions=2\treplication_factor=1",
        "  partition=0\tleader=1\treplicas=1\tisr=1",
        "  partition=1\tleader=1\treplicas=1\tisr=1",
    ]
    assert cli("topic", "alter", name, "--partitions", "3", *b) == (0, f"{name} now has 3 partitions\n")
    assert cli("topic", "describe", name, *b)[1].splitlines()[0] == f"{name}\tpartitions=3\treplication_factor=1"
    assert cli("topic", "alter", name, "--partitions", "3", *b)[0] == 1  # INVALID_PARTITIONS: no increase
    assert cli("topic", "delete", name, *b) == (0, f"deleted {name}\n")
    assert name not in cli("topic", "list", *b)[1].split()


def test_produce_consume_transactional_and_json(
    bootstrap_servers: str, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    b = ["-b", bootstrap_servers]
    topic = new_topic("cli-pc", 1)
    assert cli("produce", topic, "--key-separator", ":", *b, stdin="k1:one\nk2:two\n")[0] == 0
    data = tmp_path / "lines.txt"
    data.write_text("three\nfour\n")
    assert cli("produce", topic, "--file", str(data), "--transactional", f"tid-{topic}", *b)[0] == 0
    code, out = cli("consume", topic, "--from-beginning", "--count", "4", "--isolation", "read_committed", *b)
    assert code == 0 and out.splitlines() == ["one", "two", "three", "four"]
    code, out = cli("consume", topic, "--from-beginning", "--count", "1", "--json", *b)
    assert json.loads(out) | {"timestamp": 0} == {
        "topic": topic,
        "partition": 0,
        "offset": 0,
        "timestamp": 0,
        "key": "k1",
        "value": "one",
        "headers": [],
    }
    code, out = cli("consume", topic, "--idle-timeout-ms", "300", *b)  # from the end: nothing, then idle exit
    assert (code, out) == (0, "")


def test_consume_with_group_commits(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    b = ["-b", bootstrap_servers]
    topic = new_topic("cli-grp", 1)
    group = fresh_name("cli-g")
    cli("produce", topic, *b, stdin="a\nb\nc\n")
    assert cli("consume", topic, "--group", group, "--from-beginning", "--count", "2", *b) == (0, "a\nb\n")
    assert cli("consume", topic, "--group", group, "--count", "1", *b) == (0, "c\n")
    code, out = cli("group", "describe", group, "--json", *b)
    assert code == 0 and [(r["partition"], r["current_offset"], r["lag"]) for r in json.loads(out)] == [(0, 3, 0)]
    code, out = cli("group", "list", *b)
    assert code == 0 and group in out.splitlines()


def test_txn_commands(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    from oncelog.client import sync

    b = ["-b", bootstrap_servers]
    topic = new_topic("cli-txn", 1)
    tid = f"tid-{topic}"
    with sync.Producer(bootstrap_servers, transactional_id=tid) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(topic, b"hang", partition=0)
        p.flush()
        pid, _epoch = p.producer_id_and_epoch
        code, out = cli("txn", "list", *b)
        assert code == 0 and f"{tid}\tproducer_id={pid}\tstate=Ongoing" in out.splitlines()
        code, out = cli("txn", "describe", tid, *b)
        assert code == 0 and "state=Ongoing" in out and f"partitions={topic}-0" in out
        code, out = cli("txn", "abort", "--topic", topic, "--partition", "0", "--producer-id", str(pid), *b)
        assert code == 0 and out.startswith(f"aborted producer {pid}")
        code, out = cli(
            "consume", topic, "--from-beginning", "--isolation", "read_committed", "--idle-timeout-ms", "300", *b
        )
        assert (code, out) == (0, "")  # the hanging record is aborted, so stable and invisible
        assert cli("txn", "abort", "--topic", topic, "--partition", "0", "--producer-id", "999999", *b)[0] == 1
        p.close()


def test_copy_command_with_transform(
    bootstrap_servers: str, new_topic: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    b = ["-b", bootstrap_servers]
    src, dst = new_topic("cli-cp-in", 1), new_topic("cli-cp-out", 1)
    (tmp_path / "cli_transform_mod.py").write_text(
        "def shout(record):\n    return None if record.value == b'skip' else record.value.upper() + b'!'\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    cli("produce", src, *b, stdin="x\nskip\ny\n")
    code, out = cli(
        "copy",
        src,
        dst,
        "--group",
        fresh_name("cli-cp"),
        "--transform",
        "cli_transform_mod:shout",
        "--idle-timeout-ms",
        "300",
        *b,
    )
    assert (code, out) == (0, "copied 3 records, wrote 2\n")
    assert cli("consume", dst, "--from-beginning", "--count", "2", "--isolation", "read_committed", *b) == (
        0,
        "X!\nY!\n",
    )
    assert cli("copy", src, dst, "--transform", "nomodule", *b)[0] == 2


def test_oncelog_entry_point_dispatches_client_commands(bootstrap_servers: str) -> None:
    exe = Path(sys.executable).with_name("oncelog")
    proc = subprocess.run(
        [str(exe), "topic", "list", "-b", bootstrap_servers], capture_output=True, text=True, timeout=30
    )
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([str(exe), "txn", "list", "-b", "127.0.0.1:1"], capture_output=True, text=True, timeout=30)
    assert proc.returncode == 1 and "KafkaConnectionError" in proc.stderr


def test_topic_delete_records(bootstrap_servers: str, new_topic: Callable[..., str]) -> None:
    b = ["-b", bootstrap_servers]
    topic = new_topic("cli-delrec", 2)
    cli("produce", topic, "--partition", "0", *b, stdin="a\nb\nc\nd\n")
    cli("produce", topic, "--partition", "1", *b, stdin="e\nf\n")
    assert cli("topic", "delete-records", topic, "--partition", "0", "--before", "2", *b) == (
        0,
        f"{topic}-0\tlow_watermark=2\n",
    )
    assert cli("consume", topic, "--partition", "0", "--from-beginning", "--idle-timeout-ms", "300", *b) == (
        0,
        "c\nd\n",
    )
    assert cli("topic", "delete-records", topic, "--partition", "1", "--before", "end", *b) == (
        0,
        f"{topic}-1\tlow_watermark=2\n",
    )
    assert cli("consume", topic, "--partition", "1", "--from-beginning", "--idle-timeout-ms", "300", *b) == (0, "")
    assert cli("topic", "delete-records", topic, "--partition", "0", "--before", "5", *b)[0] == 1  # out of range
    with pytest.raises(SystemExit):
        cli("topic", "delete-records", topic, "--partition", "0", "--before", "-1", *b)


def test_group_delete_offsets(
    bootstrap_servers: str, new_topic: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    b = ["-b", bootstrap_servers]
    topic = new_topic("cli-offdel", 2)
    group = fresh_name("cli-offdel-g")
    cli("produce", topic, "--partition", "0", *b, stdin="a\nb\n")
    cli("produce", topic, "--partition", "1", *b, stdin="c\n")
    assert cli("consume", topic, "--group", group, "--from-beginning", "--count", "3", *b)[0] == 0
    described = json.loads(cli("group", "describe", group, "--topic", topic, "--json", *b)[1])
    assert [(r["partition"], r["current_offset"]) for r in described] == [(0, 2), (1, 1)]
    assert cli("group", "delete-offsets", group, "--topic", topic, "--partition", "1", *b) == (
        0,
        f"deleted offsets of {group} for {topic}-1\n",
    )
    described = json.loads(cli("group", "describe", group, "--topic", topic, "--json", *b)[1])
    assert [(r["partition"], r["current_offset"]) for r in described] == [(0, 2), (1, None)]
    assert cli("group", "delete-offsets", group, "--topic", topic, *b) == (
        0,
        f"deleted offsets of {group} for {topic}-0,{topic}-1\n",
    )
    assert cli("group", "delete-offsets", group, "--topic", topic, *b)[0] == 1  # the emptied group is gone
    assert f"GROUP_ID_NOT_FOUND: OffsetDelete {group}" in capsys.readouterr().err
