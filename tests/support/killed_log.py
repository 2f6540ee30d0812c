"""Dropping a PartitionLog the way SIGKILL would, for recovery tests."""

from __future__ import annotations

import os

from oncelog.storage.log import PartitionLog


def crash(log: PartitionLog) -> None:
    """Close every descriptor of the log's segments and nothing more: no flush, no snapshot, and index entries
    still waiting in memory (``storage.index_file``) never reach their files, as after a killed process."""
    for segment in log.segments:
        files = (segment, segment.offset_index, segment.time_index, segment.txn_index)
        for file in files:
            if file.fd >= 0:
                os.close(file.fd)
                file.fd = -1


def write_index_entries(log: PartitionLog) -> None:
    """Write the index entries every segment still holds in memory, as a roll or a clean close would (so that
    index files can be compared with those of a recovered log, whose rebuilt indexes are written whole)."""
    for segment in log.segments:
        segment.write_index_entries()
