"""Named fault points for crash-consistency tests.

A test starts the broker with ``ONCELOG_FAULTS=name[:action][,name[:action]...]`` in its environment. When the code
reaches a named point listed there, the action happens: ``crash`` (the default: the process dies at once with
SIGKILL, as a power cut would leave it, minus the page cache) or ``delay`` (sleep one second). Unset, a fault point
is one dictionary lookup on an empty dict.

Points (where they are reached):
- ``txn.after_prepare``: the PrepareCommit/PrepareAbort record is durable, no marker written yet.
- ``txn.after_first_marker``: one partition's marker is durable, the others are not written.
- ``txn.before_complete``: every marker is durable, the CompleteCommit/CompleteAbort record is not written.
- ``produce.after_append``: a Produce request's batches are appended, not yet fsynced or answered.
"""

from __future__ import annotations

import os
import signal
import time

ENV_VAR = "ONCELOG_FAULTS"
KNOWN_POINTS = frozenset({"txn.after_prepare", "txn.after_first_marker", "txn.before_complete", "produce.after_append"})


def _parse(spec: str) -> dict[str, str]:
    actions: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, action = item.partition(":")
        if name not in KNOWN_POINTS:
            raise ValueError(f"{ENV_VAR}: unknown fault point {name!r}")
        actions[name] = action or "crash"
    return actions


_ACTIVE: dict[str, str] = _parse(os.environ.get(ENV_VAR, ""))


def fault_point(name: str) -> None:
    """Trigger the fault configured for ``name``, if any."""
    if not _ACTIVE:
        return
    action = _ACTIVE.get(name)
    if action == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    elif action == "delay":
        time.sleep(1.0)
