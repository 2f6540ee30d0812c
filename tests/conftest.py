"""Shared pytest fixtures: the broker under test.

By default the interop tests start a real ``oncelog broker`` subprocess (``support.broker.BrokerProcess``) on
a free 127.0.0.1 port with a temporary data dir, once per test module (``broker`` / ``bootstrap`` fixtures),
and stops it afterwards. Tests that kill or restart the broker use the function-scoped ``own_broker`` fixture.

``ONCELOG_TEST_BOOTSTRAP`` points the interop tests at an already-running broker instead:

* ``ONCELOG_TEST_BOOTSTRAP=127.0.0.1:9092`` -- use that broker; topics are created through the Kafka
  CreateTopics API. Tests that must kill/restart the broker (``own_broker``) are skipped, since they cannot
  control an external process.
* ``ONCELOG_TEST_BOOTSTRAP=mock`` -- run librdkafka's in-process mock cluster (``support.mock_cluster``), to
  dry-run the harness. Topics are then created through the mock's own API, because the mock does not
  implement CreateTopics. The mock also lacks idempotence checks and admin APIs, so those tests fail there
  by design; they are meant for oncelog.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterator

import pytest
from support.broker import BrokerProcess
from support.kafka_peer import KafkaPeer
from support.mock_cluster import MockCluster

ENV_BOOTSTRAP = "ONCELOG_TEST_BOOTSTRAP"
#: Broker settings of the test brokers: the first rebalance of a group does not wait the default 3 s
#: (group.initial.rebalance.delay.ms), and members may ask for session timeouts down to 1 s.
GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
_topic_counter = itertools.count()


def external_bootstrap() -> str | None:
    """The value of ``ONCELOG_TEST_BOOTSTRAP`` or None."""
    return os.environ.get(ENV_BOOTSTRAP) or None


@pytest.fixture(scope="session")
def mock_cluster() -> Iterator[MockCluster | None]:
    """The in-process mock cluster when ``ONCELOG_TEST_BOOTSTRAP=mock``, else None."""
    if external_bootstrap() != "mock":
        yield None
        return
    with MockCluster(1) as mc:
        yield mc


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess | None]:
    """A broker subprocess shared by one test module (None when an external bootstrap is configured)."""
    if external_bootstrap():
        yield None
        return
    proc = BrokerProcess(tmp_path_factory.mktemp("broker") / "data", settings=GROUP_SETTINGS)
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


@pytest.fixture(scope="module")
def bootstrap(broker: BrokerProcess | None, mock_cluster: MockCluster | None) -> str:
    """``host:port`` of the broker under test."""
    if mock_cluster is not None:
        return mock_cluster.bootstrap
    if broker is not None:
        return broker.bootstrap
    return external_bootstrap() or ""


@pytest.fixture
def own_broker(tmp_path: os.PathLike[str]) -> Iterator[BrokerProcess]:
    """A fresh broker for one test that may kill/restart it; always stopped afterwards."""
    if external_bootstrap():
        pytest.skip(f"{ENV_BOOTSTRAP} is set: cannot kill/restart an external broker")
    proc = BrokerProcess(os.path.join(tmp_path, "data"), settings=GROUP_SETTINGS)
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


def unique_topic(prefix: str) -> str:
    """A topic name unique within this test run."""
    return f"{prefix}-{os.getpid()}-{next(_topic_counter)}"


@pytest.fixture
def make_topic(bootstrap: str, mock_cluster: MockCluster | None) -> Callable[..., str]:
    """``make_topic(prefix, partitions=3) -> name``: create a fresh topic and wait until it is visible.

    Uses confluent-kafka's AdminClient against oncelog (the per-client admin tests cover each client's own
    admin API); uses the mock's API in mock mode.
    """
    from support.topics import create_topic_confluent

    def make(prefix: str = "t", partitions: int = 3, bootstrap_: str | None = None) -> str:
        name = unique_topic(prefix)
        if mock_cluster is not None and bootstrap_ is None:
            mock_cluster.create_topic(name, partitions)
        else:
            create_topic_confluent(bootstrap_ or bootstrap, name, partitions)
        return name

    return make


_PEER = pytest.StashKey[KafkaPeer]()
_LAST_PEER_USER = pytest.StashKey[str]()


@pytest.fixture(scope="session")
def kafka_peer(request: pytest.FixtureRequest) -> Iterator[KafkaPeer]:
    """One Apache Kafka (``support.kafka_peer``: fsync per append, the test brokers' group settings) for every test
    that compares with it (``interop/test_differential.py``, the Kafka column of ``bench/test_bench_smoke.py``): a
    JVM start costs many seconds of CI each. It stops once the last test using it has ended (``pytest_runtest_
    teardown`` below), not at the end of the session."""
    peer = KafkaPeer(fsync=True, settings=GROUP_SETTINGS)
    request.config.stash[_PEER] = peer
    with peer.start():
        yield peer


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    users = [item.nodeid for item in items if "kafka_peer" in getattr(item, "fixturenames", ())]
    if users:
        config.stash[_LAST_PEER_USER] = users[-1]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item) -> None:
    """Stop the shared Kafka peer after the last test that uses it (stopping twice is harmless)."""
    if item.nodeid == item.config.stash.get(_LAST_PEER_USER, None) and _PEER in item.config.stash:
        item.config.stash[_PEER].stop()
