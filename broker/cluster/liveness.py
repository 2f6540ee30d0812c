"""Ending a dead broker's session early: a broker whose registered address refuses connections has no process
listening there any more (SIGKILL, a crash), so its lease is revoked at once instead of running out after
``broker.session.timeout.ms``, and the controller moves its leaderships within a fraction of a second.

Only a refused connection counts, twice in a row: a paused, overloaded or unreachable broker still completes TCP
handshakes (the kernel accepts into the listen backlog) or times out, and keeps its session until the lease says
otherwise. A broker registers only once its listeners are bound, so a registration whose address refuses is a dead
process's. Suspicions come from the followers' fetchers, which see a leader's connections break first.
"""

from __future__ import annotations

import errno
from collections.abc import Callable

import structlog
import trio
from oncelog.broker.etcd.client import EtcdClient, EtcdError
from oncelog.broker.etcd.image import MetadataImage

log = structlog.get_logger(__name__)

#: How long one probe may take; a probe that times out says nothing (the broker may be paused or far away).
PROBE_TIMEOUT_S = 0.5
#: The wait between the two probes that must both be refused.
PROBE_INTERVAL_S = 0.1


class DeadBrokerDetector:
    """``suspect(broker_id)`` from anywhere; ``run`` probes suspects and revokes the leases of dead ones."""

    def __init__(self, client: EtcdClient, image: Callable[[], MetadataImage], listener: str, *, node_id: int) -> None:
        """``listener`` is the name of the listener probed (the inter-broker one)."""
        self._client = client
        self._image = image
        self._listener = listener
        self._node_id = node_id
        self._send, self._receive = trio.open_memory_channel[int](64)
        self._probing: set[int] = set()

    def suspect(self, broker_id: int) -> None:
        """A connection to ``broker_id`` broke; probe it unless that is under way already."""
        if broker_id == self._node_id or broker_id in self._probing:
            return
        try:
            self._send.send_nowait(broker_id)
            self._probing.add(broker_id)
        except trio.WouldBlock:
            pass  # plenty are being probed: the lease still ends the session in time

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        async for broker_id in self._receive:
            try:
                await self._check(broker_id)
            finally:
                self._probing.discard(broker_id)

    async def _check(self, broker_id: int) -> None:
        image = self._image()
        registration = image.brokers.get(broker_id)
        lease = image.broker_leases.get(broker_id, 0)
        if registration is None or not lease or self._listener not in registration.endpoints:
            return
        host, port = registration.endpoints[self._listener]
        for attempt in range(2):
            if attempt:
                await trio.sleep(PROBE_INTERVAL_S)
            if not await _refused(host, port):
                return
        if self._image().broker_leases.get(broker_id) != lease:
            return  # registered again meanwhile: a new process, with a new session
        log.warning("dead_broker", broker_id=broker_id, address=f"{host}:{port}", lease=lease)
        try:
            await self._client.revoke_lease(lease)
        except EtcdError as exc:
            log.warning("dead_broker_lease_not_revoked", broker_id=broker_id, error=str(exc))


async def _refused(host: str, port: int) -> bool:
    """True only when nothing listens at ``host:port`` (ECONNREFUSED); False when it answers or cannot be told."""
    with trio.move_on_after(PROBE_TIMEOUT_S):
        try:
            stream = await trio.open_tcp_stream(host, port)
        except OSError as exc:
            return _is_refusal(exc)
        await stream.aclose()
    return False


def _is_refusal(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) == errno.ECONNREFUSED:
        return True
    # trio's happy-eyeballs connect raises an OSError whose cause / context holds the per-address errors.
    inner = exc.__cause__ or exc.__context__
    if isinstance(inner, BaseExceptionGroup):
        return all(_is_refusal(e) for e in inner.exceptions)
    return inner is not None and _is_refusal(inner)
