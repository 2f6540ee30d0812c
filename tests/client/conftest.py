"""Fixtures of the bundled-client tests: both anyio backends, one shared broker, fresh topics.

Tests here are marked ``pytest.mark.anyio`` and run once under asyncio and once under trio. pytest-trio's
trio_mode marks every coroutine test as a trio test; the hook below takes that mark off anyio tests so the anyio
plugin alone runs them on the backend of each parametrization.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.broker import BrokerProcess
from support.topics import create_topic_confluent

# Lowered from Kafka's 10000 ms so the transaction-timeout test sees the abort within a fraction of a second.
CLEANUP_INTERVAL_MS = 200
_names = itertools.count()


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.fspath)).parents and item.get_closest_marker("anyio") is not None:
            item.own_markers[:] = [m for m in item.own_markers if m.name != "trio"]


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="session")
def client_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One broker for every client test (transaction timeouts checked every 200 ms, 3 partitions default)."""
    proc = BrokerProcess(
        tmp_path_factory.mktemp("client-broker") / "data",
        settings={
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": CLEANUP_INTERVAL_MS,
            "num.partitions": 3,
            "group.initial.rebalance.delay.ms": 0,  # Kafka default 3000; no member is waited for in these tests
        },
    )
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


@pytest.fixture(scope="session")
def bootstrap_servers(client_broker: BrokerProcess) -> str:
    return client_broker.bootstrap


def fresh_name(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_names)}"


@pytest.fixture
def new_topic(bootstrap_servers: str) -> Callable[..., str]:
    """``new_topic(prefix, partitions=3) -> name``, created with confluent-kafka's AdminClient."""

    def make(prefix: str = "c", partitions: int = 3) -> str:
        name = fresh_name(prefix)
        create_topic_confluent(bootstrap_servers, name, partitions)
        return name

    return make
