"""Driving kafkajs (Node.js) from tests: one ``tests/interop/kafkajs/driver.js`` process per step, JSON in and out."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

DRIVER = Path(__file__).resolve().parents[1] / "interop" / "kafkajs" / "driver.js"
DEADLINE_S = 90.0


def kafkajs(bootstrap: str, command: str, **job: object) -> dict:
    """Run one driver command against ``bootstrap`` (comma-separated brokers); its JSON result, or AssertionError
    with kafkajs's stderr."""
    node = shutil.which("node")
    assert node, "Node.js is not installed (dev.py test installs it)"
    assert (DRIVER.parent / "node_modules" / "kafkajs").is_dir(), "kafkajs is not installed (dev.py test runs npm ci)"
    proc = subprocess.run(
        [node, str(DRIVER), command],
        input=json.dumps({"brokers": bootstrap.split(","), **job}).encode(),
        capture_output=True,
        timeout=DEADLINE_S,
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(f"kafkajs {command} exited {proc.returncode}:\n{proc.stderr.decode()[-3000:]}")
    return json.loads(proc.stdout)
