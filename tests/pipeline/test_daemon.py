"""``oncelog.pipeline.daemon`` (spark.python.daemon.module): what it loads before forking workers starts no thread."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, os, sys
import oncelog.pipeline.daemon
print(json.dumps({
    "threads": len(os.listdir("/proc/self/task")),
    "loaded": [m for m in ("pyspark.worker", "oncelog.client", "oncelog.pipeline.options") if m in sys.modules],
    "thread_starters": [m for m in ("pyarrow", "numpy") if m in sys.modules],
}))
"""


def test_the_daemon_preloads_modules_and_starts_no_thread() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120, check=True)
    probe = json.loads(out.stdout.strip().splitlines()[-1])
    assert probe["threads"] == 1  # pyspark.daemon forks workers: no thread may exist before fork
    assert probe["thread_starters"] == []
    assert probe["loaded"] == ["pyspark.worker", "oncelog.client", "oncelog.pipeline.options"]
