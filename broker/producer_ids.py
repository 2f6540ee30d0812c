"""Producer id allocation that never hands out the same id twice, across restarts.

Like Kafka's ProducerIdManager, ids are reserved in blocks: the end of the current block is persisted (atomically,
fsynced) before any id from it is handed out, so after a crash the next start begins at the next block and unused
ids of the old block are simply skipped.
"""

from __future__ import annotations

from pathlib import Path

from oncelog.storage.checkpoint import atomic_write

#: Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE.
PRODUCER_ID_BLOCK_SIZE = 1000


class ProducerIdAllocator:
    """Hands out increasing producer ids; ``next_id`` is cheap except once per block (one fsynced file write)."""

    def __init__(self, path: Path, block_size: int = PRODUCER_ID_BLOCK_SIZE) -> None:
        self._path = path
        self._block_size = block_size
        self._next = 0
        self._block_end = 0  # exclusive; ids in [_next, _block_end) are reserved on disk

    def load(self) -> None:
        """Start after the last persisted block: ids of a block that was in use before a crash are not reused."""
        if self._path.exists():
            text = self._path.read_text().strip()
            self._next = self._block_end = int(text) if text else 0

    def next_id(self) -> int:
        if self._next >= self._block_end:
            new_end = self._next + self._block_size
            atomic_write(self._path, f"{new_end}\n".encode())
            self._block_end = new_end
        producer_id = self._next
        self._next += 1
        return producer_id
