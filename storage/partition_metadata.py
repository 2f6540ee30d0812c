"""A partition directory's ``partition.metadata`` file (KIP-516): the id of the topic its log belongs to.

Kafka's format (PartitionMetadataFile): two lines, ``version: 0`` and ``topic_id: <id>``, the id printed as Kafka's
Uuid.toString prints it (URL-safe base64 without padding). Written atomically and fsynced when the log is created
with its topic's id; read when the log directory is loaded, so that the log of a deleted topic is never taken for the
log of a topic recreated under its name (``LogManager.load``).
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from oncelog.storage.checkpoint import atomic_write
from oncelog.storage.errors import KafkaStorageError

PARTITION_METADATA_FILE = "partition.metadata"  # Log.PartitionMetadataFilename
#: PartitionMetadataFile.CURRENT_VERSION.
CURRENT_VERSION = 0


class InconsistentTopicIdError(KafkaStorageError):
    """A log directory holds another topic id than the one its log is opened with. Kafka: INCONSISTENT_TOPIC_ID
    (103) where it answers a request, KAFKA_STORAGE_ERROR for the log directory."""


def kafka_uuid_string(topic_id: uuid.UUID) -> str:
    """``topic_id`` as Kafka's Uuid.toString prints it."""
    return base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString; ValueError for anything else."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (ValueError, TypeError) as exc:
        raise ValueError(f"not a Kafka uuid: {text!r}") from exc
    if len(raw) != 16:
        raise ValueError(f"not a Kafka uuid: {text!r}")
    return uuid.UUID(bytes=raw)


def read_topic_id(directory: Path) -> uuid.UUID | None:
    """The topic id recorded in ``directory``, or None when it has no ``partition.metadata`` (a log written before
    topic ids were recorded). KafkaStorageError for a file Kafka would not read (unknown version, malformed, the
    zero id), as Kafka's PartitionMetadataReadBuffer refuses it."""
    path = Path(directory) / PARTITION_METADATA_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise KafkaStorageError(f"Cannot read {path}: {exc}") from exc
    lines = text.splitlines()
    try:
        fields = [line.split(None, 1) for line in lines[:2]]
        if len(fields) != 2 or [f[0] for f in fields] != ["version:", "topic_id:"] or len(fields[1]) != 2:
            raise ValueError("malformed")
        if int(fields[0][1]) != CURRENT_VERSION:
            raise ValueError(f"unrecognized version {fields[0][1]}")
        topic_id = parse_kafka_uuid(fields[1][1].strip())
    except (ValueError, IndexError) as exc:
        raise KafkaStorageError(f"Malformed partition metadata file {path}: {exc}") from exc
    if topic_id.int == 0:
        raise KafkaStorageError(f"Invalid topic ID in partition metadata file ({path})")
    return topic_id


def record_topic_id(directory: Path, topic_id: uuid.UUID, *, sync_dir: bool = True) -> None:
    """Record ``topic_id`` in ``directory`` (nothing to do when it already is). InconsistentTopicIdError when the
    directory holds another topic's id; the file is then left as it is. With ``sync_dir`` False the directory is
    not fsynced: the caller's next fsync of it makes the record durable."""
    recorded = read_topic_id(directory)
    if recorded == topic_id:
        return
    if recorded is not None:
        raise InconsistentTopicIdError(
            f"Tried to record topic ID {kafka_uuid_string(topic_id)} to {directory / PARTITION_METADATA_FILE}, "
            f"which holds topic ID {kafka_uuid_string(recorded)}"
        )
    text = f"version: {CURRENT_VERSION}\ntopic_id: {kafka_uuid_string(topic_id)}"
    try:
        atomic_write(Path(directory) / PARTITION_METADATA_FILE, text.encode(), sync_dir=sync_dir)
    except OSError as exc:
        raise KafkaStorageError(f"Cannot write {directory / PARTITION_METADATA_FILE}: {exc}") from exc
