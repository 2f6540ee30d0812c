"""Transaction markers on a cluster: each partition's marker goes to its leader. Partitions this broker leads get
theirs appended here (``LocalMarkerWriter``); the others' leaders get one WriteTxnMarkers request each, sent at once.
A partition whose leader is unknown or cannot be reached reports NOT_LEADER_OR_FOLLOWER, which the coordinator
retries (``TransactionCoordinator._write_markers``) until the partition has a leader again."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable

import structlog
import trio
from oncelog.broker.controller.partition_change import PartitionState
from oncelog.broker.txn.markers import MarkerWriter, TxnMarker
from oncelog.protocol import ApiKey, ErrorCode

from .peers import PeerConnections, PeerUnavailable

log = structlog.get_logger(__name__)


class ClusterMarkerWriter:
    """Routes markers to partition leaders: ``local`` for this broker's, ``peers`` for the others'."""

    def __init__(
        self,
        node_id: int,
        partition_state: Callable[[str, int], PartitionState | None],
        local: MarkerWriter,
        peers: PeerConnections,
    ) -> None:
        self._node_id = node_id
        self._partition_state = partition_state
        self._local = local
        self._peers = peers

    async def write(self, marker: TxnMarker) -> dict[tuple[str, int], ErrorCode]:
        by_leader: dict[int, set[tuple[str, int]]] = defaultdict(set)
        errors: dict[tuple[str, int], ErrorCode] = {}
        for tp in marker.partitions:
            state = self._partition_state(*tp)
            if state is None:
                errors[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            elif state.leader < 0:
                errors[tp] = ErrorCode.NOT_LEADER_OR_FOLLOWER
            else:
                by_leader[state.leader].add(tp)

        async def write_to(leader: int, partitions: set[tuple[str, int]]) -> None:
            part = TxnMarker(
                marker.producer_id,
                marker.producer_epoch,
                marker.coordinator_epoch,
                marker.commit,
                frozenset(partitions),
            )
            if leader == self._node_id:
                errors.update(await self._local.write(part))
            else:
                errors.update(await self._remote(leader, part))

        async with trio.open_nursery() as nursery:
            for leader, partitions in by_leader.items():
                nursery.start_soon(write_to, leader, partitions)
        return errors

    async def _remote(self, leader: int, marker: TxnMarker) -> dict[tuple[str, int], ErrorCode]:
        topics: dict[str, list[int]] = defaultdict(list)
        for topic, partition in sorted(marker.partitions):
            topics[topic].append(partition)
        body = {
            "markers": [
                {
                    "producer_id": marker.producer_id,
                    "producer_epoch": marker.producer_epoch,
                    "transaction_result": marker.commit,
                    "topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()],
                    "coordinator_epoch": marker.coordinator_epoch,
                }
            ]
        }
        try:
            response = await self._peers.request(leader, ApiKey.WRITE_TXN_MARKERS, body)
        except PeerUnavailable as exc:
            log.warning("markers_not_sent", leader=leader, error=str(exc))
            return dict.fromkeys(marker.partitions, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        errors: dict[tuple[str, int], ErrorCode] = {}
        for entry in response.markers:
            for topic in entry.topics:
                for p in topic.partitions:
                    errors[(topic.name, p.partition_index)] = ErrorCode(p.error_code)
        return {tp: errors.get(tp, ErrorCode.UNKNOWN_SERVER_ERROR) for tp in marker.partitions}
