"""``partition.metadata`` (KIP-516): Kafka's format, refused when malformed, never overwritten with another topic's
id; LogManager records it on creation and, loading, removes a directory recording another topic's id."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from oncelog.storage.config import LogConfig
from oncelog.storage.errors import KafkaStorageError
from oncelog.storage.partition_metadata import (
    InconsistentTopicIdError,
    kafka_uuid_string,
    parse_kafka_uuid,
    read_topic_id,
    record_topic_id,
)
from support.opened_logs import OpenedLogs

TOPIC_ID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def test_format_is_kafkas(tmp_path: Path) -> None:
    # Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, unpadded.
    assert kafka_uuid_string(TOPIC_ID) == "Dx4tPEtaaXiHlqW0w9Lh8A"
    assert parse_kafka_uuid("Dx4tPEtaaXiHlqW0w9Lh8A") == TOPIC_ID
    assert read_topic_id(tmp_path) is None
    record_topic_id(tmp_path, TOPIC_ID)
    assert (tmp_path / "partition.metadata").read_text() == "version: 0\ntopic_id: Dx4tPEtaaXiHlqW0w9Lh8A"
    assert read_topic_id(tmp_path) == TOPIC_ID
    record_topic_id(tmp_path, TOPIC_ID)  # the same id again: nothing to do
    with pytest.raises(InconsistentTopicIdError):
        record_topic_id(tmp_path, uuid.uuid4())
    assert read_topic_id(tmp_path) == TOPIC_ID


@pytest.mark.parametrize(
    "text",
    [
        "version: 1\ntopic_id: Dx4tPEtaaXiHlqW0w9Lh8A",
        "version: 0\n",
        "topic_id: Dx4tPEtaaXiHlqW0w9Lh8A\nversion: 0",
        "version: 0\ntopic_id: not-a-uuid!",
        "version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA",  # the zero id
    ],
)
def test_a_file_kafka_would_not_read_is_a_storage_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "partition.metadata").write_text(text)
    with pytest.raises(KafkaStorageError):
        read_topic_id(tmp_path)


def test_log_manager_records_ids_and_removes_another_topics_directory(tmp_path: Path, logs: OpenedLogs) -> None:
    manager = logs.manager(tmp_path, LogConfig())
    manager.load(now_ms=0)
    manager.create("t", 0, topic_id=TOPIC_ID)
    manager.create("legacy", 0)  # no id: nothing recorded
    gone = manager.create("gone", 0, topic_id=uuid.uuid4())
    with pytest.raises(InconsistentTopicIdError):
        manager.open_new("t", 0, topic_id=uuid.uuid4())
    assert read_topic_id(tmp_path / "t-0") == TOPIC_ID
    assert read_topic_id(gone.directory) is not None and read_topic_id(tmp_path / "legacy-0") is None
    manager.close()

    legacy_id, recreated_id = uuid.uuid4(), uuid.uuid4()
    current = {"t": recreated_id, "legacy": legacy_id}
    reloaded = logs.manager(tmp_path, LogConfig())
    reloaded.load(now_ms=0, topic_id_for=current.get)
    assert set(reloaded.all_logs()) == {("legacy", 0)}
    assert sorted(p.name for p in reloaded.strays_removed) == ["gone-0", "t-0"]
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_dir()) == ["legacy-0"]
    assert read_topic_id(tmp_path / "legacy-0") == legacy_id
    reloaded.close()
