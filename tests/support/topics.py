"""Topic creation / visibility helpers shared by tests (confluent-kafka AdminClient based)."""

from __future__ import annotations

import time

from confluent_kafka.admin import AdminClient, NewTopic

DEADLINE_S = 15.0


def wait_topic_visible(admin: AdminClient, name: str, partitions: int, deadline_s: float = DEADLINE_S) -> None:
    """Block until metadata shows ``name`` with ``partitions`` partitions, or raise TimeoutError."""
    end = time.monotonic() + deadline_s
    last = None
    while time.monotonic() < end:
        md = admin.list_topics(topic=name, timeout=5)
        t = md.topics.get(name)
        last = t
        if t is not None and t.error is None and len(t.partitions) == partitions:
            return
        time.sleep(0.1)
    raise TimeoutError(f"topic {name} not visible with {partitions} partitions: {last}")


def create_topic_confluent(bootstrap: str, name: str, partitions: int) -> None:
    """CreateTopics through confluent's AdminClient (replication factor 1), then wait for metadata."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(name, partitions, 1)], request_timeout=10, operation_timeout=10)
    futures[name].result(timeout=DEADLINE_S)
    wait_topic_visible(admin, name, partitions)
