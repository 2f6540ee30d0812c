"""The DelayService inside a broker (``delay.service.enable``): a client of the broker's own PLAINTEXT listener over
loopback, one per broker, with transactional id ``__oncelog-delay-<node.id>``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import structlog
from oncelog.broker.delay.service import DelayService
from oncelog.client.delay import parse_levels

if TYPE_CHECKING:
    from oncelog.broker.config import BrokerConfig
    from oncelog.broker.listeners import Listener

log = structlog.get_logger(__name__)

_WILDCARDS = {"", "0.0.0.0", "::"}


def embedded_service(
    config: BrokerConfig, listeners: Sequence[Listener], bound_ports: Mapping[str, int]
) -> DelayService | None:
    """The service for the broker with ``config`` once its ``listeners`` are bound (``bound_ports`` by listener
    name); None (logged) when no PLAINTEXT listener serves it."""
    listener = next((lst for lst in listeners if lst.security_protocol == "PLAINTEXT"), None)
    if listener is None:
        log.warning("delay_service_not_started", reason="no PLAINTEXT listener to reach the broker over loopback")
        return None
    host = listener.host
    if host in _WILDCARDS:
        host = "::1" if host == "::" else "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return DelayService(
        f"{host}:{bound_ports[listener.name]}",
        parse_levels(config.get_str("delay.levels")),
        transactional_id=f"__oncelog-delay-{config.get_int('node.id')}",
        max_buffered_records=config.get_int("delay.max.buffered.records"),
        dead_letter_topic=config.get_str("delay.dead.letter.topic") or None,
    )
