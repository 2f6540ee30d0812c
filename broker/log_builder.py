"""Creating partition logs in a worker thread, so that a topic of thousands of partitions does not stall the event
loop (each new log is a directory, three segment files and two directory fsyncs: about a millisecond).

Guarantees of ``build_logs``:

- the worker thread only opens files (``LogManager.open_new``); every log it opened is registered with the
  ``LogManager`` on the event loop, after the thread is done (the manager's thread rule), so no other thread ever
  sees its set of logs change;
- it cannot be cancelled half-way: the thread runs to its end and what it built is registered before any
  cancellation takes effect, so no log is left open without its manager knowing it;
- the first storage failure (a full disk, EMFILE) stops the thread; the logs built before it are registered and the
  failure is returned. Any other exception is raised, after the same registration.

Fault point ``topic.partition_created`` is reached in the thread after each new log (see ``oncelog.storage.faults``).
"""

from __future__ import annotations

from collections.abc import Sequence

import trio
from oncelog.broker.faults import fault_point
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import StorageError
from oncelog.storage.log import PartitionLog
from oncelog.storage.log_manager import LogManager


async def build_logs(
    logs: LogManager, topic: str, partitions: Sequence[int], config: LogConfig
) -> tuple[list[PartitionLog], OSError | StorageError | None]:
    """Create the logs of ``partitions`` of ``topic`` (none of which may have a log yet) in a worker thread and
    register them; returns the registered logs and the storage failure that stopped the thread, if any."""

    def open_all() -> tuple[list[PartitionLog], BaseException | None]:
        built: list[PartitionLog] = []
        try:
            for partition in partitions:
                built.append(logs.open_new(topic, partition, config))
                fault_point("topic.partition_created")
        except BaseException as exc:  # handed back to the loop, which registers ``built`` first
            return built, exc
        return built, None

    with trio.CancelScope(shield=True):
        built, failure = await trio.to_thread.run_sync(open_all)
    for partition_log in built:
        logs.register(partition_log)
    if failure is None or isinstance(failure, (OSError, StorageError)):
        return built, failure
    raise failure
