"""ISR maintenance on a leader: every ``replica.lag.time.max.ms`` / 2 it drops the followers that fell out of sync,
and as soon as a follower has caught up it adds it back, each change through the controller (``IsrUpdater``, Kafka's
AlterPartition): the leader adopts the ISR only once the controller stored it, so the ISR a leader acts on is never
smaller than the stored one (a follower dropped locally only could be elected with data it lacks).

One change per partition at a time; a refused or failed change (stale epochs, not the leader any more, the
controller unreachable) is not proposed again for that partition until its state changes or half a lag time has
passed, however often followers' fetches ask for a round. A refusal because a joining replica is not alive
(INELIGIBLE_REPLICA) is the exception: a restarted follower fetches as soon as it has registered, often before the
registration reaches the leader's metadata image, so the leader asks again after INELIGIBLE_RETRY_S, at a later fetch
of the follower (Kafka's leader retries at its next fetch too), instead of leaving it out of the ISR for half a lag
time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Protocol

import structlog
import trio
from oncelog.broker.controller.partition_change import PartitionState
from oncelog.broker.controller.refused import Refused
from oncelog.protocol.errors import ErrorCode

from .partitions import PartitionRoles

log = structlog.get_logger(__name__)

#: How soon an expansion refused with INELIGIBLE_REPLICA may be proposed again (about one idle follower fetch).
INELIGIBLE_RETRY_S = 0.25


class IsrUpdater(Protocol):
    """The controller's side of AlterPartition: store ``proposed`` (same epochs as the state it was computed from,
    new ISR) if still current, and return the state stored, or Refused with Kafka's error code."""

    async def alter_isr(self, topic: str, partition: int, proposed: PartitionState) -> PartitionState | Refused: ...


def isr_proposals(
    roles: PartitionRoles, log_end_offset: Callable[[str, int], int | None], now_ms: int
) -> list[tuple[str, int, PartitionState]]:
    """For each partition led here whose ISR should change: the state to propose (out-of-sync followers out,
    caught-up ones in, in assignment order)."""
    proposals = []
    for (topic, partition), role in roles.leading().items():
        leading = role.leading
        end = log_end_offset(topic, partition)
        if leading is None or end is None:
            continue
        isr = set(role.state.isr)
        new_isr = (isr - leading.out_of_sync(end, now_ms)) | leading.ready_to_join()
        if new_isr != isr:
            ordered = tuple(r for r in role.state.replicas if r in new_isr)
            proposals.append((topic, partition, replace(role.state, isr=ordered)))
    return proposals


class IsrMaintenance:
    """Runs the ISR changes of the partitions led here; ``poke`` asks for a round now (a follower caught up)."""

    def __init__(
        self,
        roles: PartitionRoles,
        updater: IsrUpdater,
        *,
        log_end_offset: Callable[[str, int], int | None],
        adopt: Callable[[str, int, PartitionState], None],
        clock_ms: Callable[[], int],
        lag_time_max_ms: int,
    ) -> None:
        self._roles = roles
        self._updater = updater
        self._log_end_offset = log_end_offset
        self._adopt = adopt
        self._clock_ms = clock_ms
        self._interval_s = lag_time_max_ms / 2 / 1000
        self._poked = trio.Event()
        #: Partitions whose last proposal failed: (partition epoch it was based on, trio time to try again from).
        self._backoff: dict[tuple[str, int], tuple[int, float]] = {}

    def poke(self) -> None:
        self._poked.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Check every half lag time (or when poked) until cancelled."""
        task_status.started()
        while True:
            with trio.move_on_after(self._interval_s):
                await self._poked.wait()
            self._poked = trio.Event()
            await self.check_once()

    async def check_once(self) -> None:
        for topic, partition, proposed in isr_proposals(self._roles, self._log_end_offset, self._clock_ms()):
            tp = (topic, partition)
            backoff = self._backoff.get(tp)
            if backoff is not None:
                if backoff[0] == proposed.partition_epoch and trio.current_time() < backoff[1]:
                    continue
                del self._backoff[tp]
            try:
                outcome = await self._updater.alter_isr(topic, partition, proposed)
            except Exception as exc:  # the controller unreachable: try again later
                log.warning("alter_isr_failed", topic=topic, partition=partition, error=str(exc))
                outcome = None
            if isinstance(outcome, Refused):
                log.info(
                    "alter_isr_refused", topic=topic, partition=partition, error=outcome.error.name, reason=str(outcome)
                )
            if outcome is None or isinstance(outcome, Refused):
                ineligible = isinstance(outcome, Refused) and outcome.error == ErrorCode.INELIGIBLE_REPLICA
                wait_s = min(INELIGIBLE_RETRY_S, self._interval_s) if ineligible else self._interval_s
                self._backoff[tp] = (proposed.partition_epoch, trio.current_time() + wait_s)
                continue
            self._adopt(topic, partition, outcome)
