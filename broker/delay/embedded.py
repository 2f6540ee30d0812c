"""The DelayService inside a broker (``delay.service.enable``): a client of the broker's own PLAINTEXT listener over
loopback, one per broker. Its transactional ids are ``__oncelog-delay-<topic>-<partition>``, the same on every
broker, so that on a cluster, where each broker's service serves exactly the delay partitions that broker leads, the
service beside a partition's new leader fences the one beside its old leader."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import structlog
from oncelog.broker.delay.service import DelayService
from oncelog.client.delay import parse_levels
from oncelog.client.types import TopicPartition

if TYPE_CHECKING:
    from oncelog.broker.config import BrokerConfig
    from oncelog.broker.listeners import Listener
    from oncelog.broker.replica_manager import ReplicaManager
    from oncelog.broker.replication.partitions import Transition

log = structlog.get_logger(__name__)

_WILDCARDS = {"", "0.0.0.0", "::"}
#: The embedded services' transactional id prefix (``DelayService.partition_transactional_id``).
EMBEDDED_TRANSACTIONAL_ID = "__oncelog-delay"


def embedded_service(
    config: BrokerConfig,
    listeners: Sequence[Listener],
    bound_ports: Mapping[str, int],
    replicas: ReplicaManager | None = None,
) -> DelayService | None:
    """The service for the broker with ``config`` once its ``listeners`` are bound (``bound_ports`` by listener
    name); None (logged) when no PLAINTEXT listener serves it. With the ``replicas`` of a cluster member it serves
    the delay partitions this broker leads, looking again at every change of a delay partition's role."""
    listener = next((lst for lst in listeners if lst.security_protocol == "PLAINTEXT"), None)
    if listener is None:
        log.warning("delay_service_not_started", reason="no PLAINTEXT listener to reach the broker over loopback")
        return None
    host = listener.host
    if host in _WILDCARDS:
        host = "::1" if host == "::" else "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    service = DelayService(
        f"{host}:{bound_ports[listener.name]}",
        parse_levels(config.get_str("delay.levels")),
        transactional_id=EMBEDDED_TRANSACTIONAL_ID,
        max_buffered_records=config.get_int("delay.max.buffered.records"),
        dead_letter_topic=config.get_str("delay.dead.letter.topic") or None,
        owns=None if replicas is None else lambda tp: replicas.leads(tp.topic, tp.partition),
    )
    if replicas is not None:

        def on_role(topic: str, partition: int, transition: Transition, leader_epoch: int) -> None:
            if service.level_of(TopicPartition(topic, partition)) is not None:
                service.reassign_soon()

        replicas.add_role_listener(on_role)
    return service
