"""kafka-python helpers shared by interop tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import kafka


@contextmanager
def kafka_python_admin(bootstrap: str) -> Iterator[kafka.KafkaAdminClient]:
    """A kafka-python admin client, closed on exit."""
    admin = kafka.KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        yield admin
    finally:
        admin.close()
