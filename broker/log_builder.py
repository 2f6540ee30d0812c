"""Creating partition logs in worker threads, so that a topic of thousands of partitions does not stall the event
loop (each new log is a directory, three segment files, two directory fsyncs and its leader-epoch checkpoint: 1 to
10 ms on the development VM, nearly all of it in system calls, which release the GIL).

Guarantees of ``build_logs``:

- the worker threads (``CREATION_THREADS``, each making every n-th partition) only open files
  (``LogManager.open_new``); every log they opened is registered with the ``LogManager`` on the event loop, after
  all of them are done (the manager's thread rule), so no other thread ever sees its set of logs change;
- it cannot be cancelled half-way: the threads run to their end and what they built is registered before any
  cancellation takes effect, so no log is left open without its manager knowing it;
- the first storage failure (a full disk, EMFILE) stops every thread before its next log; the logs built until then
  are registered and the failure is returned. Any other exception is raised, after the same registration.

Fault point ``topic.partition_created`` is reached in a thread after each new log (see ``oncelog.storage.faults``).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence

import trio
from oncelog.broker.faults import fault_point
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import StorageError
from oncelog.storage.leader_epoch import INITIAL_LEADER_EPOCH
from oncelog.storage.log import PartitionLog
from oncelog.storage.log_manager import LogManager

#: Worker threads one creation uses. Each new log costs two directory fsyncs, which release the GIL, so a few
#: threads overlap them (1,000 partitions: about 5 s with one thread on the development VM).
CREATION_THREADS = 4


async def build_logs(
    logs: LogManager,
    topic: str,
    partitions: Sequence[int],
    config: LogConfig,
    leader_epoch: int | None = INITIAL_LEADER_EPOCH,
    *,
    topic_id: uuid.UUID | None = None,
) -> tuple[list[PartitionLog], OSError | StorageError | None]:
    """Create the logs of ``partitions`` of ``topic`` (none of which may have a log yet) in worker threads and
    register them; returns the registered logs and the storage failure that stopped the creation, if any. Each new
    log records ``leader_epoch`` as starting at offset 0 (``PartitionLog.maybe_assign_epoch_start``; None: this
    broker follows the partitions), in its thread, so that the first appends write no checkpoint on the loop; and
    ``topic_id`` in its directory's ``partition.metadata`` (KIP-516)."""
    stop = threading.Event()  # set by the first thread that fails: the others stop before their next log

    def open_some(share: Sequence[int]) -> tuple[list[PartitionLog], BaseException | None]:
        built: list[PartitionLog] = []
        try:
            for partition in share:
                if stop.is_set():
                    break
                partition_log = logs.open_new(topic, partition, config, topic_id)
                built.append(partition_log)
                if leader_epoch is not None:
                    partition_log.maybe_assign_epoch_start(leader_epoch)
                fault_point("topic.partition_created")
        except BaseException as exc:  # handed back to the loop, which registers ``built`` first
            stop.set()
            return built, exc
        return built, None

    results: list[tuple[list[PartitionLog], BaseException | None]] = []

    async def run_share(share: Sequence[int]) -> None:
        results.append(await trio.to_thread.run_sync(open_some, share))

    with trio.CancelScope(shield=True):
        async with trio.open_nursery() as nursery:
            for first in range(min(CREATION_THREADS, len(partitions))):
                nursery.start_soon(run_share, partitions[first::CREATION_THREADS])
    built = sorted((log for share_built, _ in results for log in share_built), key=lambda log: log.partition)
    for partition_log in built:
        logs.register(partition_log)
    failures = [failure for _, failure in results if failure is not None]
    if not failures or isinstance(failures[0], (OSError, StorageError)):
        return built, failures[0] if failures else None
    raise failures[0]
