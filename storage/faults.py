"""Named fault points for crash-consistency and I/O-error tests (shared by storage and broker).

A test starts the broker with ``ONCELOG_FAULTS=name[:action][,name[:action]...]`` in its environment. When the code
reaches a named point listed there, the action happens:

- ``crash`` (the default): the process dies at once with SIGKILL, as a power cut would leave it, minus the page
  cache.
- ``delay``: sleep one second.
- ``eio``: the next write or fsync at that point raises ``OSError(EIO)``; the point then disarms (one-shot).
- ``eio-always``: every write or fsync at that point raises ``OSError(EIO)``.

Unset, ``fault_point`` is one truth test of an empty dict. The variable is read once, at import.

Points (where they are reached):

- ``txn.after_prepare``: the PrepareCommit/PrepareAbort record is durable, no marker written yet.
- ``txn.after_first_marker``: one partition's marker is durable, the others are not written.
- ``txn.before_complete``: every marker is durable, the CompleteCommit/CompleteAbort record is not written.
- ``produce.after_append``: a Produce request's batches are appended (in the page cache), not yet fsynced or
  answered.
- ``produce.after_fsync``: a Produce request's batches are durable, the response is not sent yet.
- ``storage.append``: a log segment is about to write appended batches (nothing of them is written yet).
- ``storage.fsync``: partition data is about to be fsynced (the data is written, not yet durable).
- ``storage.roll``: a new segment's files exist, the producer snapshot at the roll is not written yet.
- ``storage.snapshot``: a producer snapshot's temporary file is about to be written (before its rename).
- ``cleaner.after_swap_rename``: a compaction process made a group's swap file durable and is about to remove
  the old segments' files (reached in the ``storage.cleaner_process`` child only).
- ``group.after_offset_append``: a group's offset commit (plain or transactional) is appended to
  ``__consumer_offsets``, not yet fsynced or answered.
- ``topic.after_offsets_deleted``: a topic deletion's offset tombstones are durable, the topic is not removed yet.
- ``topic.partition_created``: a new topic's (or CreatePartitions') metadata is durable and one more of its partition
  logs exists; reached in the worker thread that creates them, once per partition.
"""

from __future__ import annotations

import errno
import os
import signal
import time

ENV_VAR = "ONCELOG_FAULTS"
KNOWN_POINTS = frozenset(
    {
        "txn.after_prepare",
        "txn.after_first_marker",
        "txn.before_complete",
        "produce.after_append",
        "produce.after_fsync",
        "storage.append",
        "storage.fsync",
        "storage.roll",
        "storage.snapshot",
        "cleaner.after_swap_rename",
        "group.after_offset_append",
        "topic.after_offsets_deleted",
        "topic.partition_created",
    }
)
ACTIONS = frozenset({"crash", "delay", "eio", "eio-always"})
DELAY_S = 1.0


def parse(spec: str) -> dict[str, str]:
    """``name[:action],...`` -> {name: action}; raises ValueError for an unknown point or action."""
    actions: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, action = item.partition(":")
        if name not in KNOWN_POINTS:
            raise ValueError(f"{ENV_VAR}: unknown fault point {name!r}")
        action = action or "crash"
        if action not in ACTIONS:
            raise ValueError(f"{ENV_VAR}: unknown action {action!r} for {name!r}")
        actions[name] = action
    return actions


_ACTIVE: dict[str, str] = parse(os.environ.get(ENV_VAR, ""))


def configure(spec: str) -> None:
    """Replace the active faults (for in-process tests; the broker reads ``ONCELOG_FAULTS`` at import)."""
    _ACTIVE.clear()
    _ACTIVE.update(parse(spec))


def action(name: str) -> str | None:
    """The action configured for ``name`` (None: none), for code that carries out a ``delay`` elsewhere."""
    return _ACTIVE.get(name)


def fault_point(name: str) -> None:
    """Trigger the fault configured for ``name``, if any.

    Raises ``OSError(EIO)`` for the ``eio`` actions, so call it right before the write/fsync it stands for.
    """
    if not _ACTIVE:
        return
    action = _ACTIVE.get(name)
    if action is None:
        return
    if action == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "delay":
        time.sleep(DELAY_S)
    elif action == "eio":
        del _ACTIVE[name]
        raise OSError(errno.EIO, f"injected I/O error at fault point {name}")
    elif action == "eio-always":
        raise OSError(errno.EIO, f"injected I/O error at fault point {name}")
