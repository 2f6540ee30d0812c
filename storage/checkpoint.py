"""Atomic file replacement and Kafka's offset checkpoint text format.

Checkpoint files (``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``) are::

    0                      <- version
    2                      <- number of entries
    my.topic 0 1234        <- "topic partition offset"
    my.topic 1 99
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from oncelog.storage.errors import StorageError

CHECKPOINT_VERSION = 0


def fsync_dir(path: Path) -> None:
    """fsync a directory so that entries created, renamed or removed in it are durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, data: bytes, *, sync_dir: bool = True) -> None:
    """Replace ``path`` with ``data``: after a crash the file holds either the old or the new content.

    Writes ``<path>.tmp``, fsyncs it, renames it over ``path`` and fsyncs the directory (unless ``sync_dir`` is
    False: the caller fsyncs it later, and until then the rename may be lost). When writing the temporary file fails
    (ENOSPC, EIO) it is removed and the OSError propagates; ``path`` is untouched.
    """
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        os.fsync(fd)
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise
    os.close(fd)
    os.replace(tmp, path)
    if sync_dir:
        fsync_dir(path.parent)


def encode_checkpoint(entries: list[str]) -> bytes:
    """Kafka's checkpoint text: the version, the number of entries, then one entry a line."""
    return ("\n".join([str(CHECKPOINT_VERSION), str(len(entries)), *entries]) + "\n").encode()


def read_checkpoint(path: Path, fields: int) -> list[list[str]]:
    """The entries of a checkpoint file, each split into ``fields`` words; a missing file has none.

    Raises StorageError when the version, the count or an entry's shape is wrong."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    lines = text.splitlines()
    try:
        if int(lines[0]) != CHECKPOINT_VERSION:
            raise StorageError(f"{path}: unsupported checkpoint version {lines[0]!r}")
        count = int(lines[1])
    except (IndexError, ValueError) as exc:
        raise StorageError(f"{path}: malformed checkpoint: {exc}") from exc
    entries = [line.split(" ") for line in lines[2:]]
    if len(entries) != count:
        raise StorageError(f"{path}: expected {count} entries, found {len(entries)}")
    if any(len(entry) != fields for entry in entries):
        raise StorageError(f"{path}: malformed checkpoint: an entry does not have {fields} fields")
    return entries


def encode_offset_checkpoint(offsets: dict[tuple[str, int], int]) -> bytes:
    """Render ``{(topic, partition): offset}`` in Kafka's checkpoint format (sorted for stable output)."""
    return encode_checkpoint(
        [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(offsets.items())]
    )


def write_offset_checkpoint(path: Path, offsets: dict[tuple[str, int], int]) -> None:
    """Atomically write an offset checkpoint file."""
    atomic_write(path, encode_offset_checkpoint(offsets))


def read_offset_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    """Parse an offset checkpoint; a missing file is empty. Raises StorageError when malformed."""
    try:
        return {(topic, int(partition)): int(offset) for topic, partition, offset in read_checkpoint(path, 3)}
    except ValueError as exc:
        raise StorageError(f"{path}: malformed checkpoint: {exc}") from exc
