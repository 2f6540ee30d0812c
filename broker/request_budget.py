"""The broker-wide budget of request bytes in flight (Kafka's ``queued.max.request.bytes`` memory pool).

A connection reserves a frame's size when its size prefix arrives, before reading the body, and gives it back once
the request is handled. Guaranteed: the reservations held at once never exceed the capacity, except that a frame
larger than the whole capacity is admitted alone (it then reserves the whole capacity), so every frame that
``socket.request.max.bytes`` admits can be served. Waiters are served first come, first served: a large frame is
not overtaken forever by small ones. A whole frame is reserved at once (as Kafka's pool allocates it), so
connections holding part of a budget can never wait for each other.
"""

from __future__ import annotations

from collections import deque

import trio

#: ``queued.max.request.bytes`` meaning no bound (Kafka's default).
UNBOUNDED = -1


class RequestBudget:
    """Bytes reserved by requests being read or handled, at most ``capacity`` (``UNBOUNDED``: no limit)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        #: Bytes reserved now.
        self.reserved = 0
        self._waiters: deque[tuple[int, trio.Event]] = deque()

    def _charge(self, size: int) -> int:
        return size if self.capacity == UNBOUNDED else min(size, self.capacity)

    async def reserve(self, size: int) -> int:
        """Wait until ``size`` bytes fit, reserve them and return the amount to ``release`` later. A checkpoint only
        when it waits."""
        charge = self._charge(size)
        if not self._waiters and self._fits(charge):
            self.reserved += charge
            return charge
        entry = (charge, trio.Event())
        self._waiters.append(entry)
        try:
            await entry[1].wait()
        except BaseException:
            if entry[1].is_set():  # reserved for us just as we were cancelled: hand it back
                self.release(charge)
            else:
                self._waiters.remove(entry)
                self._wake()
            raise
        return charge

    def release(self, charge: int) -> None:
        """Give back what ``reserve`` returned."""
        self.reserved -= charge
        self._wake()

    def _fits(self, charge: int) -> bool:
        return self.capacity == UNBOUNDED or self.reserved + charge <= self.capacity

    def _wake(self) -> None:
        while self._waiters and self._fits(self._waiters[0][0]):
            charge, event = self._waiters.popleft()
            self.reserved += charge
            event.set()


class ResponseHold:
    """One response's share of a budget of response bytes held until sent (Fetch responses, which a client that
    does not read pins): ``take`` before reading what the response will carry, ``settle`` to what was read (which
    may pass the budget by the one batch KIP-74 returns whole), ``release`` once the response is sent."""

    def __init__(self, budget: RequestBudget) -> None:
        self._budget = budget
        self.held = 0

    def take(self, wanted: int) -> int:
        """Hold up to ``wanted`` more bytes, as many as the budget has free (never waits); returns how many."""
        budget = self._budget
        free = wanted if budget.capacity == UNBOUNDED else budget.capacity - budget.reserved
        granted = max(0, min(wanted, free))
        budget.reserved += granted
        self.held += granted
        return granted

    def settle(self, used: int) -> None:
        """Hold exactly ``used`` bytes from now on."""
        self._budget.reserved += used - self.held
        self.held = used
        self._budget.release(0)  # wake the budget's waiters, if any, for what was given back

    def release(self) -> None:
        self._budget.release(self.held)
        self.held = 0
