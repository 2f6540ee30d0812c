"""RequestBudget: reservations within the capacity, first come first served, cancellation gives back."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from oncelog.broker.request_budget import UNBOUNDED, RequestBudget, ResponseHold


async def test_reservations_wait_until_they_fit_in_arrival_order() -> None:
    budget = RequestBudget(100)
    assert await budget.reserve(60) == 60
    order: list[str] = []

    async def take(name: str, size: int) -> None:
        await budget.reserve(size)
        order.append(name)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(take, "large", 80)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(take, "small", 10)  # would fit now, but waits behind the large one
        await trio.testing.wait_all_tasks_blocked()
        assert order == [] and budget.reserved == 60
        budget.release(60)
        await trio.testing.wait_all_tasks_blocked()
        assert sorted(order) == ["large", "small"] and budget.reserved == 90  # (woken in either order)


async def test_a_frame_larger_than_the_capacity_is_admitted_alone() -> None:
    budget = RequestBudget(100)
    assert await budget.reserve(500) == 100
    with trio.move_on_after(0.05) as scope:
        await budget.reserve(1)
    assert scope.cancelled_caught
    budget.release(100)
    assert budget.reserved == 0


async def test_a_cancelled_waiter_leaves_no_reservation_and_unblocks_the_next() -> None:
    budget = RequestBudget(100)
    await budget.reserve(90)
    got: list[int] = []
    async with trio.open_nursery() as nursery:
        cancel = trio.CancelScope()

        async def cancelled() -> None:
            with cancel:
                await budget.reserve(50)

        async def after() -> None:
            got.append(await budget.reserve(10))

        nursery.start_soon(cancelled)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(after)
        await trio.testing.wait_all_tasks_blocked()
        assert got == []
        cancel.cancel()
    assert got == [10] and budget.reserved == 100


@pytest.mark.parametrize("size", [0, 1, 1 << 40])
async def test_unbounded_never_waits(size: int) -> None:
    budget = RequestBudget(UNBOUNDED)
    with trio.fail_after(1):
        assert await budget.reserve(size) == size


def test_a_response_hold_takes_what_is_free_settles_to_what_was_read_and_gives_it_back() -> None:
    budget = RequestBudget(100)
    first, second = ResponseHold(budget), ResponseHold(budget)
    assert first.take(70) == 70
    assert second.take(70) == 30  # only what is free
    second.settle(50)  # the first batch, whole, passes the budget
    first.settle(10)
    assert budget.reserved == 60
    assert ResponseHold(budget).take(1000) == 40
    first.release()
    second.release()
    assert budget.reserved == 40
