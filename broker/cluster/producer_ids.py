"""Producer ids on a cluster: blocks claimed from etcd (``etcd.producer_id_blocks``), so no two brokers (and no
broker across restarts) ever hand out the same id.

``next_id`` is synchronous, as on the single node: ids come from the block in hand, and ``run`` claims the next block
in the background once the one in hand is nine-tenths used (Kafka's ``RPCProducerIdManager`` prefetches at the same
point), so callers never wait for etcd except after a burst of more than a block's worth of new producers, when
``next_id`` raises ``ProducerIdsUnavailable`` (InitProducerId answers COORDINATOR_LOAD_IN_PROGRESS, retriable).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import structlog
import trio
from oncelog.broker.etcd.client import EtcdError

log = structlog.get_logger(__name__)

#: Share of a block used before the next one is claimed.
PREFETCH_AT = 0.9
#: Wait between attempts while etcd cannot be reached.
CLAIM_RETRY_S = 1.0


class ProducerIdsUnavailable(Exception):
    """No producer id is in hand now; one will be shortly."""


class ClusterProducerIds:
    """Hands out ids from blocks claimed through ``claim`` (returns the next block reserved for this broker)."""

    def __init__(self, claim: Callable[[], Awaitable[range]]) -> None:
        self._claim = claim
        self._blocks: list[range] = []
        self._next = 0
        self._wanted = trio.Event()

    def load(self) -> None:
        """Nothing to read locally: every block comes from etcd."""

    def next_id(self) -> int:
        while self._blocks and self._next >= self._blocks[0].stop:
            self._blocks.pop(0)
            if self._blocks:
                self._next = self._blocks[0].start
        if not self._blocks:
            self._wanted.set()
            raise ProducerIdsUnavailable("no producer id block is claimed yet")
        block = self._blocks[0]
        producer_id = self._next
        self._next += 1
        if len(self._blocks) == 1 and producer_id - block.start >= PREFETCH_AT * len(block):
            self._wanted.set()
        return producer_id

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Claim the first block, report started, then claim one more whenever asked to."""
        await self._claim_one()
        task_status.started()
        while True:
            await self._wanted.wait()
            self._wanted = trio.Event()
            await self._claim_one()

    async def _claim_one(self) -> None:
        while True:
            try:
                block = await self._claim()
                break
            except EtcdError as exc:
                log.warning("producer id block not claimed; retrying", error=str(exc))
                await trio.sleep(CLAIM_RETRY_S)
        if not self._blocks:
            self._next = block.start
        self._blocks.append(block)
