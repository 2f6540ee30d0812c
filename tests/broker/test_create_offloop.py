"""Partition logs are created off the event loop: while a creation is held inside the thread that makes its logs, the
broker keeps answering other connections, Metadata never reports a partition without a log as available, and racing
CreateTopics / Metadata auto-creation / CreatePartitions / DeleteTopics of the same name stay correct."""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
import trio.testing
from oncelog.broker import fd_budget
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.storage.config import LogConfig
from oncelog.storage.log import PartitionLog
from oncelog.storage.segment import OPEN_FILES_PER_SEGMENT, LogSegment

from broker.helpers import batch, create_topic_body, produce_body

NODE = 1  # node.id default
NO_LEADER = -1


class Hold:
    """Stops the creation of one partition log (``topic``-``partition``) inside the thread that makes it, until
    ``release``. A log of that partition created on the event loop thread instead (the loop would stall) is not
    held but refused with an AssertionError, and noted, so that the test fails rather than hangs."""

    def __init__(self, topic: str, partition: int) -> None:
        self.directory_name = f"{topic}-{partition}"
        self.reached = threading.Event()
        self._released = threading.Event()
        self.on_event_loop = False

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        original = PartitionLog.open.__func__
        hold = self

        def open_log(cls, directory: Path, config, **kwargs) -> PartitionLog:
            if Path(directory).name == hold.directory_name:
                if _in_trio():
                    hold.on_event_loop = True
                    hold.reached.set()
                    raise AssertionError(f"{hold.directory_name} created on the event loop thread")
                hold.reached.set()
                hold._released.wait()
            return original(cls, directory, config, **kwargs)

        monkeypatch.setattr(PartitionLog, "open", classmethod(open_log))

    async def wait_reached(self) -> None:
        await trio.to_thread.run_sync(self.reached.wait)
        assert not self.on_event_loop, "the partition log was created on the event loop thread"

    def release(self) -> None:
        self._released.set()


def _in_trio() -> bool:
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


@pytest.fixture
def holds(broker, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Hold]]:
    """Holds to install; all are released before the broker stops (so its shielded creations can end)."""
    installed: list[Hold] = []
    yield installed
    for hold in installed:
        hold.release()


def _hold(holds: list[Hold], monkeypatch: pytest.MonkeyPatch, topic: str, partition: int) -> Hold:
    hold = Hold(topic, partition)
    hold.install(monkeypatch)
    holds.append(hold)
    return hold


def _metadata_body(topic: str, *, auto_create: bool = False) -> dict:
    return {"topics": [{"name": topic}], "allow_auto_topic_creation": auto_create}


def _assert_available_iff_log_exists(broker, topic_metadata) -> None:
    """Every partition Metadata reports available has a log; every other one is LEADER_NOT_AVAILABLE, leader -1."""
    for partition in topic_metadata.partitions:
        has_log = broker.node.logs.get(topic_metadata.name, partition.partition_index) is not None
        if has_log:
            assert (partition.error_code, partition.leader_id) == (ErrorCode.NONE, NODE)
        else:
            assert (partition.error_code, partition.leader_id) == (ErrorCode.LEADER_NOT_AVAILABLE, NO_LEADER)


class _Answer:
    """The response of a request sent from a task of its own."""

    def __init__(self) -> None:
        self.response = None
        self.done = trio.Event()


def _send_in_background(nursery: trio.Nursery, connection, api_key: ApiKey, version: int, body: dict) -> _Answer:
    answer = _Answer()

    async def send() -> None:
        answer.response = await connection.request(api_key, version, body)
        answer.done.set()

    nursery.start_soon(send)
    return answer


async def _create_in_background(nursery: trio.Nursery, broker, name: str, partitions: int) -> _Answer:
    """CreateTopics of ``name`` sent on a connection of its own."""
    connection = await broker.connect()
    return _send_in_background(nursery, connection, ApiKey.CREATE_TOPICS, 5, create_topic_body(name, partitions))


async def test_other_connections_are_served_while_a_large_creation_is_held(
    broker, client, holds, monkeypatch, nursery
) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("other"))
    hold = _hold(holds, monkeypatch, "big", 700)
    creator = await broker.connect()
    created = _send_in_background(nursery, creator, ApiKey.CREATE_TOPICS, 5, create_topic_body("big", 1000))
    await hold.wait_reached()

    software = {"client_software_name": "t", "client_software_version": "1"}
    versions = await client.request(ApiKey.API_VERSIONS, 3, software)
    assert versions.error_code == ErrorCode.NONE
    produced = await client.request(ApiKey.PRODUCE, 7, produce_body("other", 0, batch([b"meanwhile"])))
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    metadata = await client.request(ApiKey.METADATA, 9, _metadata_body("big"))
    [big] = metadata.topics
    assert big.error_code == ErrorCode.NONE and len(big.partitions) == 1000
    _assert_available_iff_log_exists(broker, big)
    assert big.partitions[700].error_code == ErrorCode.LEADER_NOT_AVAILABLE
    early = await client.request(ApiKey.PRODUCE, 7, produce_body("big", 999, batch([b"too early"])))
    assert early.responses[0].partition_responses[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not created.done.is_set()

    hold.release()
    await created.done.wait()
    [result] = created.response.topics
    assert (result.error_code, result.num_partitions) == (ErrorCode.NONE, 1000)
    assert all(broker.node.logs.get("big", p) is not None for p in range(1000))
    # Answered only once every log exists: a producer may write at once, to any partition.
    produced = await creator.request(ApiKey.PRODUCE, 7, produce_body("big", 999, batch([b"right after"])))
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    [big] = (await client.request(ApiKey.METADATA, 9, _metadata_body("big"))).topics
    assert {p.error_code for p in big.partitions} == {ErrorCode.NONE}


async def test_a_second_creation_of_the_name_is_refused_while_the_first_builds(
    broker, client, holds, monkeypatch, nursery
) -> None:
    hold = _hold(holds, monkeypatch, "dup", 3)
    first = await _create_in_background(nursery, broker, "dup", 4)
    await hold.wait_reached()

    second = await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("dup", 8))
    assert second.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS
    # A Metadata request that may auto-create sees the topic being created, not a topic of its own.
    [seen] = (await client.request(ApiKey.METADATA, 9, _metadata_body("dup", auto_create=True))).topics
    assert (seen.error_code, len(seen.partitions)) == (ErrorCode.NONE, 4)
    _assert_available_iff_log_exists(broker, seen)

    hold.release()
    await first.done.wait()
    [result] = first.response.topics
    assert (result.error_code, result.num_partitions) == (ErrorCode.NONE, 4)
    assert broker.node.logs.get("dup", 4) is None and broker.node.logs.get("dup", 3) is not None


async def test_create_topics_racing_a_metadata_auto_creation_gets_topic_already_exists(
    start_broker, holds, monkeypatch, nursery, tmp_path
) -> None:
    # A data dir of its own: ``holds`` has started the ``broker`` fixture's on the default one.
    broker = await start_broker(tmp_path / "three-partitions", num_partitions="3")
    client = await broker.connect()
    hold = _hold(holds, monkeypatch, "auto", 2)
    auto = _send_in_background(
        nursery, await broker.connect(), ApiKey.METADATA, 9, _metadata_body("auto", auto_create=True)
    )
    await hold.wait_reached()

    explicit = await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("auto", 5))
    assert explicit.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS

    hold.release()
    await auto.done.wait()
    [topic] = auto.response.topics
    assert (topic.error_code, [p.error_code for p in topic.partitions]) == (ErrorCode.NONE, [ErrorCode.NONE] * 3)
    assert broker.node.metadata.get("auto").partitions == 3


async def test_create_partitions_waits_for_the_creation_under_way(broker, client, holds, monkeypatch, nursery) -> None:
    hold = _hold(holds, monkeypatch, "grow", 2)
    created = await _create_in_background(nursery, broker, "grow", 4)
    await hold.wait_reached()
    body = {"topics": [{"name": "grow", "count": 8, "assignments": None}], "timeout_ms": 30000, "validate_only": False}
    grown = _send_in_background(nursery, client, ApiKey.CREATE_PARTITIONS, 3, body)
    await trio.testing.wait_all_tasks_blocked()
    assert broker.node.metadata.get("grow").partitions == 4  # the growth waits for the topic's first logs

    hold.release()
    await created.done.wait()
    await grown.done.wait()
    assert created.response.topics[0].error_code == ErrorCode.NONE
    assert grown.response.results[0].error_code == ErrorCode.NONE
    assert all(broker.node.logs.get("grow", p) is not None for p in range(8))
    [topic] = (await client.request(ApiKey.METADATA, 9, _metadata_body("grow"))).topics
    assert [p.error_code for p in topic.partitions] == [ErrorCode.NONE] * 8


async def test_deletion_waits_for_the_creation_under_way_and_leaves_nothing(
    broker, client, holds, monkeypatch, nursery, tmp_path
) -> None:
    hold = _hold(holds, monkeypatch, "gone", 1)
    created = await _create_in_background(nursery, broker, "gone", 3)
    await hold.wait_reached()
    body = {"topic_names": ["gone"], "timeout_ms": 30000}
    deleted = _send_in_background(nursery, client, ApiKey.DELETE_TOPICS, 4, body)
    await trio.testing.wait_all_tasks_blocked()
    assert broker.node.metadata.get("gone") is not None  # the deletion waits for the logs being created

    hold.release()
    await created.done.wait()
    await deleted.done.wait()
    assert created.response.topics[0].error_code == ErrorCode.NONE
    assert deleted.response.responses[0].error_code == ErrorCode.NONE
    assert broker.node.metadata.get("gone") is None
    assert [key for key in broker.node.logs.all_logs() if key[0] == "gone"] == []
    assert not list((tmp_path / "data").glob("gone-*"))
    again = await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("gone", 2))
    assert again.topics[0].error_code == ErrorCode.NONE


async def test_configs_altered_during_the_creation_reach_the_new_logs(
    broker, client, holds, monkeypatch, nursery
) -> None:
    hold = _hold(holds, monkeypatch, "tuned", 0)
    created = await _create_in_background(nursery, broker, "tuned", 2)
    await hold.wait_reached()
    body = {
        "resources": [{"resource_type": 2, "resource_name": "tuned",
                       "configs": [{"name": "retention.ms", "config_operation": 0, "value": "4242"}]}],
        "validate_only": False,
    }  # fmt: skip
    altered = await client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)
    assert altered.responses[0].error_code == ErrorCode.NONE

    hold.release()
    await created.done.wait()
    assert [broker.node.logs.get("tuned", p).config.retention_ms for p in range(2)] == [4242, 4242]


async def test_creations_beyond_the_file_descriptor_budget_are_refused(broker, client, monkeypatch) -> None:
    in_use = fd_budget.open_descriptors()
    assert in_use is not None  # Linux
    limit = in_use + fd_budget.RESERVED_FDS + 10 * fd_budget.FDS_PER_NEW_PARTITION
    monkeypatch.setattr(fd_budget.resource, "getrlimit", lambda _which: (limit, limit))
    refused = await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("wide", 40))
    assert refused.topics[0].error_code == ErrorCode.INVALID_PARTITIONS
    assert "file descriptors" in refused.topics[0].error_message
    assert broker.node.metadata.get("wide") is None
    accepted = await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("narrow", 4))
    assert accepted.topics[0].error_code == ErrorCode.NONE
    body = {"topics": [{"name": "narrow", "count": 44, "assignments": None}], "timeout_ms": 30000,
            "validate_only": False}  # fmt: skip
    grown = await client.request(ApiKey.CREATE_PARTITIONS, 3, body)
    assert grown.results[0].error_code == ErrorCode.INVALID_PARTITIONS
    assert broker.node.metadata.get("narrow").partitions == 4


def test_pending_creations_count_against_the_budget(monkeypatch) -> None:
    monkeypatch.setattr(fd_budget, "open_descriptors", lambda: 100)
    limit = 100 + fd_budget.RESERVED_FDS + 30 * fd_budget.FDS_PER_NEW_PARTITION
    monkeypatch.setattr(fd_budget.resource, "getrlimit", lambda _which: (limit, limit))
    assert fd_budget.partitions_affordable() == 30
    assert fd_budget.partitions_affordable(pending_partitions=25) == 5
    assert fd_budget.partitions_affordable(pending_partitions=40) == 0
    monkeypatch.setattr(fd_budget.resource, "getrlimit", lambda _which: (fd_budget.resource.RLIM_INFINITY,) * 2)
    assert (
        fd_budget.partitions_affordable()
        == (fd_budget.UNLIMITED_FDS - 100 - fd_budget.RESERVED_FDS) // fd_budget.FDS_PER_NEW_PARTITION
    )
    monkeypatch.setattr(fd_budget, "open_descriptors", lambda: None)  # no /proc
    assert (
        fd_budget.partitions_affordable()
        == (fd_budget.UNLIMITED_FDS - fd_budget.RESERVED_FDS) // fd_budget.FDS_PER_NEW_PARTITION
    )


async def test_a_storage_failure_mid_creation_answers_storage_error_and_the_restart_completes(
    start_broker, monkeypatch, tmp_path
) -> None:
    broker = await start_broker()
    client = await broker.connect()
    original = PartitionLog.open.__func__

    def full_disk_at_partition_3(cls, directory: Path, config, **kwargs) -> PartitionLog:
        if Path(directory).name == "part-3":
            raise OSError(28, "No space left on device")
        return original(cls, directory, config, **kwargs)

    monkeypatch.setattr(PartitionLog, "open", classmethod(full_disk_at_partition_3))
    response = await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("part", 6))
    assert response.topics[0].error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert broker.node.logs.get("part", 3) is None  # the logs made before the failure, if any, are registered
    [topic] = (await client.request(ApiKey.METADATA, 9, _metadata_body("part"))).topics
    _assert_available_iff_log_exists(broker, topic)
    again = await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("part", 6))
    assert again.topics[0].error_code == ErrorCode.TOPIC_ALREADY_EXISTS  # the topic stands, as its metadata

    monkeypatch.undo()
    await broker.stop()
    broker = await start_broker(tmp_path / "data")
    assert all(broker.node.logs.get("part", p) is not None for p in range(6))


def test_the_budget_counts_the_descriptors_a_segment_really_keeps(tmp_path) -> None:
    """OPEN_FILES_PER_SEGMENT (storage's declaration, which the budget multiplies) is what opening a segment, and a
    log with several segments, really costs in /proc/self/fd."""
    before = fd_budget.open_descriptors()
    partition_log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=1024))
    try:
        assert fd_budget.open_descriptors() - before == OPEN_FILES_PER_SEGMENT
        for _ in range(2):
            partition_log.append(batch([b"v"]), now_ms=int(time.time() * 1000))  # the records' timestamps are now
            partition_log.roll()
        assert len(partition_log.segments) == 3
        assert fd_budget.open_descriptors() - before == 3 * OPEN_FILES_PER_SEGMENT  # older segments stay open
    finally:
        partition_log.close()
    assert fd_budget.open_descriptors() == before
    assert fd_budget.FDS_PER_NEW_PARTITION == fd_budget.SEGMENTS_PER_NEW_PARTITION * OPEN_FILES_PER_SEGMENT


def test_a_segment_that_cannot_open_all_its_files_leaks_none(tmp_path, monkeypatch) -> None:
    """EMFILE on the third file of a segment closes the two opened before it."""
    real_open = os.open
    opened = 0

    def failing_open(path, flags, mode=0o777):
        nonlocal opened
        opened += 1
        if opened == 3:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_open(path, flags, mode)

    (tmp_path / "t-0").mkdir()
    before = fd_budget.open_descriptors()
    monkeypatch.setattr(os, "open", failing_open)
    with pytest.raises(OSError, match="Too many open files"):
        LogSegment(tmp_path / "t-0", 0, LogConfig())
    monkeypatch.setattr(os, "open", real_open)
    assert fd_budget.open_descriptors() == before
