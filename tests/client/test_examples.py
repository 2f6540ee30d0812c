"""The examples run end to end against the test broker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from .conftest import fresh_name

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def test_examples_produce_then_process(bootstrap_servers: str) -> None:
    orders, invoices = fresh_name("orders"), fresh_name("invoices")

    def run(script: str, *args: str) -> str:
        proc = subprocess.run(
            [sys.executable, str(EXAMPLES / script), "--bootstrap", bootstrap_servers, *args],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
        return proc.stdout

    out = run("transactional_producer.py", "--topic", orders, "--batches", "2", "--per-batch", "4")
    assert out.splitlines() == ["batch 0: committed 4 records", "batch 1: committed 4 records", "batch 2: aborted"]
    group = fresh_name("invoicer")
    common = ("--input", orders, "--output", invoices, "--group", group, "--idle-seconds", "0.8")
    assert run("exactly_once_processor.py", *common) == "processed 8 records\n"
    assert run("exactly_once_processor.py", *common) == "processed 0 records\n"  # offsets were committed


def test_readme_sync_example_runs(bootstrap_servers: str) -> None:
    readme = (ROOT / "README.md").read_text()
    block = next(b for b in readme.split("```python\n")[1:] if "oncelog.client.sync import" in b).split("```")[0]
    code = block.replace("127.0.0.1:9092", bootstrap_servers).replace('"events"', repr(fresh_name("events")))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("RecordMetadata(topic='events-")
