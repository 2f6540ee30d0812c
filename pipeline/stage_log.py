"""Timestamps per stage of the Spark data source, for finding where a job's time goes: with the environment variable
``ONCELOG_SPARK_STAGE_LOG`` set to a file path (before the SparkSession starts, so that executors inherit it), every
task's read and write and every driver commit appends one JSON line: the stage, the process id, wall-clock start and
end (epoch seconds), the process's CPU seconds during the stage, and the stage's own fields (rows, partition, batch).

Guarantees: without the variable nothing is recorded and a stage costs one environment lookup; a line is written
with one ``write`` call in append mode, so lines of concurrent workers do not interleave (POSIX append writes of
less than PIPE_BUF). A stage that raises records nothing.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

#: Environment variable: the file the stage lines go to.
STAGE_LOG_ENV = "ONCELOG_SPARK_STAGE_LOG"


@contextmanager
def stage(name: str, **fields: Any) -> Iterator[dict[str, Any]]:
    """Time the block as stage ``name``; the yielded dict takes more fields (e.g. ``rows``) before the block ends."""
    path = os.environ.get(STAGE_LOG_ENV)
    if not path:
        yield fields
        return
    start, cpu = time.time(), time.process_time()
    yield fields
    line = {"stage": name, "pid": os.getpid(), "start": start, "end": time.time(), "cpu": time.process_time() - cpu}
    with open(path, "a") as out:
        out.write(json.dumps(line | fields) + "\n")
