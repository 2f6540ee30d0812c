"""The role table: which role this broker has for each partition (leader, follower or none), from the partition
states the controller hands in. Pure: the caller passes log offsets and the time, and acts on the returned
``Transition`` (start or stop fetching, wake waiters).

Rules (Kafka's ``ReplicaManager.applyDelta`` / ``Partition.makeLeader`` / ``makeFollower``):
- A partition no state was applied to is led by this broker alone (the single node): ISR = [self]; a cluster member
  (``lead_unassigned=False``) leads nothing the controller did not give it.
- A state older than the applied one (smaller ``(leader_epoch, partition_epoch)``) is ignored: the controller's
  changes arrive in order per partition, a late one is stale.
- ``state.leader == node_id``: lead. A new leader epoch starts at the log end offset; every follower gets a full
  ``replica.lag.time.max.ms`` before it can be dropped from the ISR; the high watermark starts where the log has it.
- ``node_id in state.replicas``: follow ``state.leader`` (NO_LEADER: follow nobody until a leader is elected).
- Otherwise the replica is stopped: it neither leads nor follows.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from oncelog.broker.controller.partition_change import NO_LEADER, PartitionState

from .leader_state import REPLICA_LAG_TIME_MAX_MS, LeaderReplicaState

TopicPartition = tuple[str, int]


class Transition(enum.Enum):
    """What applying a state did to a partition's role."""

    BECAME_LEADER = "became_leader"
    BECAME_FOLLOWER = "became_follower"
    STOPPED = "stopped"
    #: Same role and leader epoch; the ISR (or partition epoch) changed.
    UPDATED = "updated"
    #: Older than the state already applied: nothing changed.
    IGNORED = "ignored"


@dataclass
class PartitionRole:
    """One partition's applied state; ``leading`` is set while this broker leads it."""

    state: PartitionState
    leading: LeaderReplicaState | None = None
    #: The leader this broker follows for the partition (None: it leads, or is stopped, or there is no leader).
    follows: int | None = None
    #: The high watermark the leader last sent this follower (-1: none yet).
    leader_high_watermark: int = -1


class PartitionRoles:
    """This broker's role for each partition it was given a state for."""

    def __init__(
        self, node_id: int, *, lag_time_max_ms: int = REPLICA_LAG_TIME_MAX_MS, lead_unassigned: bool = True
    ) -> None:
        self.node_id = node_id
        self.lead_unassigned = lead_unassigned
        self.lag_time_max_ms = lag_time_max_ms
        self._roles: dict[TopicPartition, PartitionRole] = {}

    def get(self, tp: TopicPartition) -> PartitionRole | None:
        return self._roles.get(tp)

    def leads(self, tp: TopicPartition) -> bool:
        """True when this broker leads the partition (for one no state was applied to: ``lead_unassigned``)."""
        role = self._roles.get(tp)
        return self.lead_unassigned if role is None else role.leading is not None

    def leading(self) -> dict[TopicPartition, PartitionRole]:
        """The partitions this broker leads by an applied state."""
        return {tp: role for tp, role in self._roles.items() if role.leading is not None}

    def isr_size(self, tp: TopicPartition) -> int:
        role = self._roles.get(tp)
        return 1 if role is None else len(role.state.isr)

    def forget(self, tp: TopicPartition) -> None:
        """The partition was deleted."""
        self._roles.pop(tp, None)

    def apply(
        self, tp: TopicPartition, state: PartitionState, *, log_end_offset: int, high_watermark: int, now_ms: int
    ) -> Transition:
        """Adopt ``state`` for the partition whose log currently ends at ``log_end_offset``."""
        role = self._roles.get(tp)
        if role is not None and (state.leader_epoch, state.partition_epoch) < (
            role.state.leader_epoch,
            role.state.partition_epoch,
        ):
            return Transition.IGNORED
        same_epoch = role is not None and role.state.leader_epoch == state.leader_epoch
        if state.leader == self.node_id:
            if role is not None and role.leading is not None and same_epoch:
                role.state = state
                role.leading.isr_changed(state.isr)
                return Transition.UPDATED
            leading = LeaderReplicaState(
                leader=self.node_id,
                replicas=state.replicas,
                isr=state.isr,
                leader_epoch_start_offset=log_end_offset,
                high_watermark=high_watermark,
                now_ms=now_ms,
                lag_time_max_ms=self.lag_time_max_ms,
            )
            self._roles[tp] = PartitionRole(state, leading)
            return Transition.BECAME_LEADER
        if self.node_id in state.replicas:
            if role is not None and role.leading is None and same_epoch and role.state.leader == state.leader:
                role.state = state
                return Transition.UPDATED
            follows = None if state.leader == NO_LEADER else state.leader
            self._roles[tp] = PartitionRole(state, follows=follows)
            return Transition.BECAME_FOLLOWER
        self._roles[tp] = PartitionRole(state)
        return Transition.STOPPED

    def adopt(self, tp: TopicPartition, state: PartitionState) -> bool:
        """The controller accepted this leader's ISR change: ``state`` is now current. False when the partition is
        no longer led here under that leader epoch (the answer came too late)."""
        role = self._roles.get(tp)
        if role is None or role.leading is None or role.state.leader_epoch != state.leader_epoch:
            return False
        if state.partition_epoch <= role.state.partition_epoch:
            return False
        role.state = state
        role.leading.isr_changed(state.isr)
        return True
