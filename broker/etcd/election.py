"""Controller election through etcd: the first broker to create the controller key under its session lease wins.

The key holds the winner's broker id; its create revision is the controller epoch (it only grows: every election
creates the key anew at a later revision), so a message stamped with an older epoch comes from a deposed controller.
The controller keeps the role while its lease lives; when the lease lapses or the controller resigns, etcd deletes the
key and every waiting candidate tries again. This is etcd's documented election recipe (its ``concurrency.Election``),
written as one compare-and-swap transaction plus a watch for the key's deletion.
"""

from __future__ import annotations

from dataclasses import dataclass

from .client import GRPC_NOT_FOUND, Compare, CompareTarget, Delete, EtcdClient, EtcdError, Get, KeyValue, Put
from .session import SessionLost


@dataclass(frozen=True)
class Controller:
    """Who the controller is and since which election."""

    broker_id: int
    epoch: int

    @classmethod
    def from_kv(cls, kv: KeyValue) -> Controller:
        return cls(broker_id=int(kv.value.decode()), epoch=kv.create_revision)


class ControllerElection:
    """One broker's candidacy for the controller key ``key``, under the lease ``lease_id`` of its session."""

    def __init__(self, client: EtcdClient, key: str, *, broker_id: int, lease_id: int) -> None:
        self._client = client
        self._key = key
        self._broker_id = broker_id
        self._lease_id = lease_id

    async def campaign(self) -> Controller:
        """Wait until this broker is the controller; returns its epoch. Cancel to stop campaigning."""
        while True:
            try:
                attempt = await self._client.txn(
                    [Compare.absent(self._key)],
                    [Put(self._key, str(self._broker_id).encode(), lease=self._lease_id)],
                    [Get(self._key)],
                )
            except EtcdError as exc:
                if exc.code == GRPC_NOT_FOUND:  # the lease is gone: this broker's session has ended
                    raise SessionLost(f"campaign under an expired lease: {exc}") from exc
                raise
            if attempt.succeeded:
                return Controller(self._broker_id, attempt.revision)
            holders = attempt.ranges[0]
            if not holders:
                continue  # deleted between the compare and the read: try again
            holder = holders[0]
            if holder.lease == self._lease_id:
                return Controller.from_kv(holder)  # ours already (an earlier attempt's answer was lost)
            await self._wait_until_gone(holder)

    async def _wait_until_gone(self, holder: KeyValue) -> None:
        async for batch in self._client.watch(self._key, start_revision=holder.mod_revision + 1, prefix=False):
            if any(event.deleted for event in batch.events):
                return

    async def current(self) -> Controller | None:
        """The controller now, or None between elections."""
        kv = await self._client.get(self._key)
        return Controller.from_kv(kv) if kv else None

    async def resign(self) -> bool:
        """Give the role up at once (controlled shutdown), only if this broker still holds it."""
        result = await self._client.txn(
            [Compare(self._key, CompareTarget.LEASE, "==", self._lease_id)], [Delete(self._key)]
        )
        return result.succeeded
