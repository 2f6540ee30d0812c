"""The named fault points themselves: parsing, the ``eio`` actions in storage, and that the Produce points are
reached by a real broker (which dies there, and whose data then survives the restart)."""

from __future__ import annotations

import errno
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from oncelog.protocol import encode_request
from oncelog.protocol.records import SimpleRecord, encode_batch
from oncelog.storage import faults
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import KafkaStorageError
from oncelog.storage.log import PartitionLog
from support.broker import BrokerProcess
from support.topics import create_topic_confluent
from support.wire import Record, WireClient
from support.wire import encode_batch as wire_batch


def request_killing_the_broker(broker: BrokerProcess, api_key: int, version: int, body: dict) -> None:
    """Send one request that reaches the broker's armed crash fault point: it dies (SIGKILL) before answering."""
    frame = encode_request(api_key, version, 1, "fault-test", body)
    with socket.create_connection(("127.0.0.1", broker.port), timeout=10) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        assert sock.recv(4) == b""  # the broker died before answering
    assert broker.wait_exit(10) == -9


@pytest.fixture
def fault() -> Iterator[None]:
    yield
    faults.configure("")


def _batch(value: bytes = b"v") -> bytes:
    return encode_batch([SimpleRecord(b"k", value, [], 1000)])


def test_parse() -> None:
    assert faults.parse("") == {}
    assert faults.parse("storage.fsync:eio, produce.after_append") == {
        "storage.fsync": "eio",
        "produce.after_append": "crash",
    }
    with pytest.raises(ValueError, match="unknown fault point"):
        faults.parse("storage.nope")
    with pytest.raises(ValueError, match="unknown action"):
        faults.parse("storage.fsync:explode")


def test_eio_on_append_leaves_the_log_unchanged(tmp_path: Path, fault: None) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    log.append(_batch(b"first"), now_ms=0)
    size = log.active_segment.size
    faults.configure("storage.append:eio")
    with pytest.raises(KafkaStorageError) as raised:
        log.append(_batch(b"second"), now_ms=0)
    assert isinstance(raised.value.__cause__, OSError) and raised.value.__cause__.errno == errno.EIO
    assert (log.log_end_offset, log.active_segment.size) == (1, size)
    assert log.append(_batch(b"third"), now_ms=0).first_offset == 1  # one-shot: the next write works


def test_eio_always_on_fsync_keeps_durable_offset(tmp_path: Path, fault: None) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig())
    log.append(_batch(), now_ms=0)
    faults.configure("storage.fsync:eio-always")
    for _ in range(2):
        with pytest.raises(KafkaStorageError):
            log.flush_data()
        with pytest.raises(KafkaStorageError):
            log.flush()
    assert (log.durable_offset, log.recovery_point) == (0, 0)
    faults.configure("")
    log.flush_data()
    assert log.durable_offset == 1


def test_eio_at_roll_and_snapshot(tmp_path: Path, fault: None) -> None:
    log = PartitionLog.open(tmp_path / "t-0", LogConfig(segment_bytes=200))
    log.append(_batch(b"x" * 150), now_ms=0)
    faults.configure("storage.roll:eio")
    with pytest.raises(KafkaStorageError):
        log.append(_batch(b"y" * 150), now_ms=0)  # the roll fails before the batch is written
    assert log.log_end_offset == 1
    assert log.append(_batch(b"z" * 150), now_ms=0).first_offset == 1
    faults.configure("storage.snapshot:eio")
    with pytest.raises(OSError):
        log.producer_state.take_snapshot(log.log_end_offset)
    assert not list((tmp_path / "t-0").glob("*.tmp"))


@pytest.mark.parametrize("point", ["produce.after_append", "produce.after_fsync"])
def test_produce_points_are_reached(tmp_path: Path, point: str) -> None:
    broker = BrokerProcess(tmp_path / "data")
    try:
        broker.start()
        create_topic_confluent(broker.bootstrap, "p", 1)
        broker.env = {"ONCELOG_FAULTS": point}
        broker.restart(hard=True)
        with WireClient(broker.bootstrap) as client, pytest.raises(ConnectionError):
            client.produce("p", 0, wire_batch([Record(b"k", b"unacknowledged")]))
        assert broker.wait_exit(10) == -9
        broker.env = {}
        broker.start()
        with WireClient(broker.bootstrap) as client:
            # SIGKILL keeps the page cache: the appended batch survives, acknowledged or not.
            assert client.list_offset("p", 0) == (0, 1)
    finally:
        broker.close()


def test_flush_and_checkpoint_reports_failures_instead_of_raising(tmp_path: Path, fault: None) -> None:
    from oncelog.storage.log_manager import RECOVERY_POINT_CHECKPOINT, LogManager

    manager = LogManager(tmp_path, LogConfig())
    manager.load(now_ms=0)
    log = manager.create("t", 0)
    log.append(_batch(), now_ms=0)
    faults.configure("storage.fsync:eio-always")
    failures = manager.flush_and_checkpoint()
    assert len(failures) == 1 and isinstance(failures[0], KafkaStorageError)
    assert log.recovery_point == 0
    assert "t 0 0" in (tmp_path / RECOVERY_POINT_CHECKPOINT).read_text()  # the checkpoint is still written
    faults.configure("")
    assert manager.flush_and_checkpoint() == []
    assert "t 0 1" in (tmp_path / RECOVERY_POINT_CHECKPOINT).read_text()


def test_crash_after_offset_append_then_restart_serves_consistent_offsets(tmp_path: Path) -> None:
    """The broker dies with an offset commit appended but unacknowledged: after the restart the commit is either
    wholly there or absent, and the group coordinator serves new commits."""
    from confluent_kafka import Consumer, TopicPartition
    from oncelog.protocol import ApiKey

    broker = BrokerProcess(tmp_path / "data", env={"ONCELOG_FAULTS": "group.after_offset_append"})
    try:
        broker.start()
        create_topic_confluent(broker.bootstrap, "offs", 1)
        body = {
            "group_id": "g",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": "offs",
                    "partitions": [{"partition_index": 0, "committed_offset": 5, "committed_metadata": ""}],
                }
            ],
        }
        request_killing_the_broker(broker, ApiKey.OFFSET_COMMIT, 2, body)

        broker.env = {}
        broker.start()
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False})
        [before] = consumer.committed([TopicPartition("offs", 0)], timeout=15)
        assert before.offset in (5, -1001)  # the unacknowledged commit: all or nothing
        consumer.commit(offsets=[TopicPartition("offs", 0, 7)], asynchronous=False)
        [after] = consumer.committed([TopicPartition("offs", 0)], timeout=15)
        assert after.offset == 7
        consumer.close()
    finally:
        broker.close()


def test_crash_between_offset_tombstones_and_topic_removal_resurrects_nothing(tmp_path: Path) -> None:
    """The broker dies once a topic deletion's offset tombstones are durable, before the topic is removed: after the
    restart the topic is still there without those offsets, the deletion can be retried, and a topic created again
    under the name has no offsets either."""
    from confluent_kafka import OFFSET_INVALID, Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient
    from oncelog.protocol import ApiKey

    def committed(bootstrap: str) -> int:
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "g", "enable.auto.commit": False})
        try:
            [partition] = consumer.committed([TopicPartition("doomed", 0)], timeout=15)
            return partition.offset
        finally:
            consumer.close()

    broker = BrokerProcess(tmp_path / "data", env={"ONCELOG_FAULTS": "topic.after_offsets_deleted"})
    try:
        broker.start()
        create_topic_confluent(broker.bootstrap, "doomed", 1)
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False})
        consumer.commit(offsets=[TopicPartition("doomed", 0, 5)], asynchronous=False)
        consumer.close()
        assert committed(broker.bootstrap) == 5
        request_killing_the_broker(broker, ApiKey.DELETE_TOPICS, 4, {"topic_names": ["doomed"], "timeout_ms": 1})

        broker.env = {}
        broker.start()
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        assert "doomed" in admin.list_topics(timeout=15).topics
        assert committed(broker.bootstrap) == OFFSET_INVALID
        admin.delete_topics(["doomed"], operation_timeout=10)["doomed"].result(15)
        create_topic_confluent(broker.bootstrap, "doomed", 1)
        assert committed(broker.bootstrap) == OFFSET_INVALID
    finally:
        broker.close()


def test_crash_in_the_middle_of_a_topic_creation_recovers_every_partition(tmp_path: Path) -> None:
    """The broker dies once the first log of a new 8-partition topic exists (its metadata is durable, most of its
    directories are not made): after the restart the topic has all 8 partitions, each one takes writes."""
    import json

    from oncelog.protocol import ApiKey

    broker = BrokerProcess(tmp_path / "data", env={"ONCELOG_FAULTS": "topic.partition_created"})
    try:
        broker.start()
        body = {"topics": [{"name": "half", "num_partitions": 8, "replication_factor": 1, "assignments": [],
                            "configs": []}], "timeout_ms": 10000, "validate_only": False}  # fmt: skip
        request_killing_the_broker(broker, ApiKey.CREATE_TOPICS, 5, body)
        data = tmp_path / "data"
        assert json.loads((data / "topics.json").read_text())["topics"]["half"]["partitions"] == 8
        assert 1 <= len(list(data.glob("half-*"))) < 8  # one per creation thread at most

        broker.env = {}
        broker.start()
        assert sorted(p.name for p in data.glob("half-*")) == [f"half-{p}" for p in range(8)]
        with WireClient(broker.bootstrap) as client:
            for partition in range(8):
                assert client.produce("half", partition, wire_batch([Record(b"k", b"v")])).error_code == 0
                assert client.list_offset("half", partition) == (0, 1)
    finally:
        broker.close()
