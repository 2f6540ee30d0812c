"""Topic set-up and read-back for the pipeline tests, through the bundled blocking client."""

from __future__ import annotations

import itertools
import os

from oncelog.client import TopicPartition
from oncelog.client.sync import Admin, Consumer, Producer

_names = itertools.count()


def new_topic(bootstrap: str, prefix: str, partitions: int) -> str:
    name = f"{prefix}-{os.getpid()}-{next(_names)}"
    with Admin(bootstrap) as admin:
        admin.create_topic(name, partitions)
    return name


def produce(
    bootstrap: str, topic: str, count: int, *, start: int = 0, transactional_id: str | None = None, abort: bool = False
) -> None:
    """``count`` records with keys/values ``k{i}`` / ``v{i}``, optionally in one (aborted) transaction."""
    kw = {"transactional_id": transactional_id} if transactional_id else {}
    with Producer(bootstrap, linger_ms=20, batch_size=256 * 1024, **kw) as p:
        if transactional_id:
            p.init_transactions()
            p.begin_transaction()
        handles = [
            p.send(topic, f"v{i}".encode(), f"k{i}".encode(), headers=[("h", str(i).encode())])
            for i in range(start, start + count)
        ]
        p.flush()
        for h in handles[-1:]:
            h.get(30)
        if transactional_id:
            if abort:
                p.abort_transaction()
            else:
                p.commit_transaction()


def read_all(bootstrap: str, topic: str, *, isolation: str = "read_committed", idle_ms: int = 1500) -> list:
    """Every record of ``topic`` visible at ``isolation`` (stops when no more arrive for ``idle_ms``)."""
    with Consumer(bootstrap, isolation_level=isolation, auto_offset_reset="earliest", max_poll_records=10000) as c:
        c.assign(c.partitions_for_topic(topic))
        out = []
        while True:
            got = c.getmany(timeout_ms=idle_ms, max_records=10000)
            if not got:
                return out
            for records in got.values():
                out.extend(records)


def values(records: list) -> list[bytes]:
    return sorted(r.value for r in records)


__all__ = ["TopicPartition", "new_topic", "produce", "read_all", "values"]
