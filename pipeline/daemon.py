"""A PySpark daemon for ``format("oncelog")`` sessions: ``spark.python.daemon.module=oncelog.pipeline.daemon``.

PySpark's daemon (``pyspark.daemon``) forks every executor Python worker, and each worker then imports PySpark's
worker modules, this package and the client: about 0.5-1 s per new worker on a busy 2-core machine, paid by every
task that needs a fresh worker (a streaming copy needs two per task: the source's and the sink's). This daemon
imports those modules once, before it forks, then runs PySpark's own daemon loop, so a forked worker starts with them
loaded.

Guarantee: it imports only modules that start no thread (checked in ``tests/pipeline/test_daemon.py``), as
``pyspark.daemon`` requires of anything loaded before ``fork``; pyarrow and numpy start threads when imported, so
workers still import them after the fork.
"""

from __future__ import annotations

import pyspark.sql.datasource
import pyspark.sql.worker.commit_data_source_write
import pyspark.sql.worker.python_streaming_sink_runner
import pyspark.sql.worker.write_into_data_source
import pyspark.worker  # noqa: F401
from oncelog.client import record_decode
from oncelog.pipeline import offsets, options  # noqa: F401
from pyspark.daemon import manager

record_decode.decoder()  # imports the compiled record reader (aiokafka's), if installed

if __name__ == "__main__":
    manager()
