"""ISR maintenance on a leader: every ``replica.lag.time.max.ms`` / 2 it drops the followers that fell out of sync,
and as soon as a follower has caught up it adds it back, each change through the controller (``IsrUpdater``, Kafka's
AlterPartition): the leader adopts the ISR only once the controller stored it, so the ISR a leader acts on is never
smaller than the stored one (a follower dropped locally only could be elected with data it lacks).

A follower joins only by a fetch of its current incarnation (``leader_state``): the proposal names the incarnation
of each joining follower (Kafka's AlterPartition v3 ``NewIsrWithEpochs``, KIP-903) and the controller refuses it
(INELIGIBLE_REPLICA) if that broker has registered again since, or is not registered.

One change per partition at a time; a refused or failed change (stale epochs, not the leader any more, the
controller unreachable) is not proposed again for that partition until its state or the proposal changes (a
follower's new incarnation caught up, say) or half a lag time has passed, however often followers' fetches ask for a
round. A refusal because a joining replica is not eligible (INELIGIBLE_REPLICA: its registration changed in etcd
before the leader's image showed it) is asked again after INELIGIBLE_RETRY_S, at a later fetch of the follower
(Kafka's leader retries at its next fetch too), instead of leaving it out of the ISR for half a lag time.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Protocol

import structlog
import trio
from oncelog.broker.controller.partition_change import PartitionState
from oncelog.broker.controller.refused import Refused
from oncelog.protocol.errors import ErrorCode

from .leader_state import IncarnationOf, single_incarnation
from .partitions import PartitionRoles

log = structlog.get_logger(__name__)

#: How soon an expansion refused with INELIGIBLE_REPLICA may be proposed again (about one idle follower fetch).
INELIGIBLE_RETRY_S = 0.25
#: What a refused proposal is remembered by: the partition epoch it was based on, the ISR and who joins as what.
_Proposal = tuple[int, tuple[int, ...], tuple[tuple[int, int], ...]]


class IsrUpdater(Protocol):
    """The controller's side of AlterPartition: store ``proposed`` (same epochs as the state it was computed from,
    new ISR) if still current and each of the ``joining`` brokers is still registered as the incarnation given, and
    return the state stored, or Refused with Kafka's error code."""

    async def alter_isr(
        self, topic: str, partition: int, proposed: PartitionState, joining: Mapping[int, int]
    ) -> PartitionState | Refused: ...


def isr_proposals(
    roles: PartitionRoles,
    log_end_offset: Callable[[str, int], int | None],
    now_ms: int,
    incarnation_of: IncarnationOf = single_incarnation,
) -> list[tuple[str, int, PartitionState]]:
    """For each partition led here whose ISR should change: the state to propose (out-of-sync followers out,
    caught-up ones of their current incarnation in, in assignment order)."""
    proposals = []
    for (topic, partition), role in roles.leading().items():
        leading = role.leading
        end = log_end_offset(topic, partition)
        if leading is None or end is None:
            continue
        isr = set(role.state.isr)
        new_isr = (isr - leading.out_of_sync(end, now_ms)) | set(leading.ready_to_join(now_ms, incarnation_of))
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
        incarnation_of: IncarnationOf = single_incarnation,
    ) -> None:
        """``incarnation_of`` tells a broker's current incarnation (its registration), None when unregistered."""
        self._roles = roles
        self._updater = updater
        self._log_end_offset = log_end_offset
        self._adopt = adopt
        self._clock_ms = clock_ms
        self._incarnation_of = incarnation_of
        self._interval_s = lag_time_max_ms / 2 / 1000
        self._poked = trio.Event()
        #: Partitions whose last proposal failed: (that proposal, trio time to try again from).
        self._backoff: dict[tuple[str, int], tuple[_Proposal, float]] = {}

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
        proposals = isr_proposals(self._roles, self._log_end_offset, self._clock_ms(), self._incarnation_of)
        # Taken before any await: a fetch by a newer incarnation meanwhile must not lend the proposal its name.
        joinings = [self._joining((topic, partition), proposed) for topic, partition, proposed in proposals]
        for (topic, partition, proposed), joining in zip(proposals, joinings, strict=True):
            tp = (topic, partition)
            proposal = (proposed.partition_epoch, proposed.isr, tuple(sorted(joining.items())))
            backoff = self._backoff.get(tp)
            if backoff is not None:
                if backoff[0] == proposal and trio.current_time() < backoff[1]:
                    continue
                del self._backoff[tp]
            try:
                outcome = await self._updater.alter_isr(topic, partition, proposed, joining)
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
                self._backoff[tp] = (proposal, trio.current_time() + wait_s)
                continue
            self._adopt(topic, partition, outcome)

    def _joining(self, tp: tuple[str, int], proposed: PartitionState) -> dict[int, int]:
        """The incarnation each follower joining the ISR in ``proposed`` fetched with."""
        role = self._roles.get(tp)
        if role is None or role.leading is None:
            return {}
        joining = {}
        for replica in proposed.isr:
            progress = role.leading.followers.get(replica)
            if replica not in role.state.isr and progress is not None and progress.incarnation is not None:
                joining[replica] = progress.incarnation
        return joining
