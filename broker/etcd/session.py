"""A broker's session with etcd: one lease, kept alive, whose loss the broker must act on at once.

Everything a broker holds only while it is alive (its registration, the controller key when it is the controller)
is written under the session's lease, so etcd deletes it when the broker stops renewing: crash, partition from etcd,
or a pause longer than the lease. The session renews every third of the TTL (as etcd's own clients do) and, when a
renewal says the lease is gone or renewals have failed for longer than the TTL, sets ``lost`` and ends ``run()`` with
``SessionLost``: from then on the broker may no longer act on anything it held under the lease (no split brain).
"""

from __future__ import annotations

import math

import structlog
import trio

from .client import EtcdClient, EtcdError, Lease

log = structlog.get_logger(__name__)

#: Kafka's ``broker.session.timeout.ms`` default is 9000; oncelog's lease TTL comes from the same property, rounded
#: up to etcd's whole seconds. Renewals run every third of it.
RENEWALS_PER_TTL = 3


class SessionLost(Exception):
    """The lease expired (or could not be renewed for a whole TTL): what was held under it is gone."""


class EtcdSession:
    """Owns one lease for the lifetime of ``run()``; ``lease.id`` is what keys are written under."""

    def __init__(self, client: EtcdClient, *, session_timeout_ms: int) -> None:
        self._client = client
        self.ttl_s = max(1, math.ceil(session_timeout_ms / 1000))
        self.lease: Lease | None = None
        self.lost = trio.Event()

    async def start(self) -> Lease:
        """Grant the lease (before ``run()``, so registrations can be written under it)."""
        self.lease = await self._client.grant_lease(self.ttl_s)
        return self.lease

    async def run(self) -> None:
        """Renew until cancelled (then revoke, so what was held goes at once) or until the lease is lost."""
        if self.lease is None:
            await self.start()
        assert self.lease is not None
        interval = self.ttl_s / RENEWALS_PER_TTL
        last_renewed = trio.current_time()
        try:
            while True:
                await trio.sleep(interval)
                try:
                    remaining = await self._client.keep_alive(self.lease.id)
                except EtcdError as exc:
                    if trio.current_time() - last_renewed < self.ttl_s:
                        log.warning("etcd lease renewal failed; retrying", error=str(exc))
                        continue
                    raise self._lose(f"no renewal for {self.ttl_s} s: {exc}") from exc
                if remaining <= 0:
                    raise self._lose("etcd says the lease has expired")
                last_renewed = trio.current_time()
        except trio.Cancelled:
            with trio.CancelScope(shield=True), trio.move_on_after(1):
                await self._revoke()
            raise

    def _lose(self, why: str) -> SessionLost:
        self.lost.set()
        log.error("etcd session lost", lease=self.lease.id if self.lease else None, reason=why)
        return SessionLost(why)

    async def _revoke(self) -> None:
        if self.lease is not None and not self.lost.is_set():
            try:
                await self._client.revoke_lease(self.lease.id)
            except EtcdError as exc:
                log.warning("etcd lease revoke failed; it lapses on its own", error=str(exc))
