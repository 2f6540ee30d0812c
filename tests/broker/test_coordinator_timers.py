"""The coordinators' timer queue (DeadlineHeap) and per-id locks (KeyedLocks), alone; and, on a coordinator, that
idle groups / transactional ids cost the timer task nothing and unknown ids leave nothing behind."""

from __future__ import annotations

import math
import random

import pytest
import trio
import trio.testing
from oncelog.broker import deadlines
from oncelog.broker.clock import now_ms
from oncelog.broker.deadlines import DeadlineHeap
from oncelog.broker.group.coordinator import JoinRequest
from oncelog.broker.group.metadata import Group
from oncelog.broker.keyed_locks import KeyedLocks
from oncelog.broker.txn.metadata import TransactionMetadata
from oncelog.protocol import ErrorCode

# DeadlineHeap ---------------------------------------------------------------------------------------------------


def _drain(heap: DeadlineHeap[str], now: float) -> list[str]:
    due = []
    while (key := heap.pop_due(now)) is not None:
        due.append(key)
    return due


def test_heap_pops_due_keys_in_deadline_order_once() -> None:
    heap: DeadlineHeap[str] = DeadlineHeap()
    heap.schedule("c", 3.0)
    heap.schedule("a", 1.0)
    heap.schedule("b", 2.0)
    assert heap.next_deadline() == 1.0
    assert heap.pop_due(0.5) is None
    assert _drain(heap, 2.0) == ["a", "b"]
    assert len(heap) == 1 and "c" in heap and "a" not in heap
    assert _drain(heap, 10.0) == ["c"]
    assert heap.next_deadline() == math.inf and heap.pop_due(math.inf) is None


def test_heap_reschedule_and_cancel_leave_one_live_deadline() -> None:
    heap: DeadlineHeap[str] = DeadlineHeap()
    heap.schedule("a", 1.0)
    heap.schedule("a", 5.0)  # later: the old entry is stale
    assert heap.next_deadline() == 5.0 and heap.deadline("a") == 5.0
    assert _drain(heap, 4.0) == []
    assert not heap.schedule_earlier("a", 6.0)
    assert heap.schedule_earlier("a", 2.0)
    assert _drain(heap, 2.0) == ["a"]
    heap.schedule("b", 1.0)
    heap.cancel("b")
    heap.schedule("c", math.inf)  # inf means no deadline
    assert len(heap) == 0 and _drain(heap, 100.0) == []


def test_heap_stays_bounded_under_rescheduling() -> None:
    """Stale entries are compacted: a key rescheduled a million times does not keep a million entries."""
    heap: DeadlineHeap[int] = DeadlineHeap()
    for i in range(100_000):
        heap.schedule(i % 10, float(i))
    assert len(heap) == 10
    assert len(heap._heap) <= 2 * 10 + deadlines.COMPACT_SLACK + 1


def test_heap_matches_a_model() -> None:
    rng = random.Random(23)
    heap: DeadlineHeap[int] = DeadlineHeap()
    model: dict[int, float] = {}
    now = 0.0
    for _ in range(20_000):
        op = rng.random()
        key = rng.randrange(50)
        if op < 0.5:
            deadline = now + rng.uniform(0, 10)
            heap.schedule(key, deadline)
            model[key] = deadline
        elif op < 0.6:
            heap.cancel(key)
            model.pop(key, None)
        else:
            now += rng.uniform(0, 1)
            due = _drain(heap, now)
            expected = sorted((d, k) for k, d in model.items() if d <= now)
            assert [d for d, _ in expected] == sorted(model[k] for k in due)
            assert set(due) == {k for _, k in expected}
            for k in due:
                del model[k]
        assert heap.next_deadline() == min(model.values(), default=math.inf)


# KeyedLocks -----------------------------------------------------------------------------------------------------


async def test_keyed_locks_serialize_one_key_and_free_it() -> None:
    locks: KeyedLocks[str] = KeyedLocks()
    order: list[str] = []

    async def hold(name: str, key: str, pause: float) -> None:
        async with locks(key):
            order.append(f"{name}+")
            await trio.sleep(pause)
            order.append(f"{name}-")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold, "a", "k", 0.05)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(hold, "b", "k", 0)
        nursery.start_soon(hold, "c", "other", 0)
        await trio.testing.wait_all_tasks_blocked()
        assert len(locks) == 1  # "k" held and awaited; "other" released and gone already
    assert order.index("a-") < order.index("b+")
    assert order.index("c-") < order.index("a-")  # another key never waits
    assert len(locks) == 0


async def test_keyed_locks_forget_a_cancelled_waiter() -> None:
    locks: KeyedLocks[str] = KeyedLocks()

    async def wait_for_it() -> None:
        with trio.move_on_after(0.01):
            async with locks("k"):
                pytest.fail("acquired a held lock")

    async with locks("k"):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait_for_it)
        assert len(locks) == 1
    assert len(locks) == 0


async def test_keyed_locks_keep_nothing_for_many_keys() -> None:
    locks: KeyedLocks[int] = KeyedLocks()
    for key in range(10_000):
        async with locks(key):
            pass
    assert len(locks) == 0


# Coordinators ---------------------------------------------------------------------------------------------------


async def test_unknown_group_and_transactional_ids_leave_nothing(start_broker) -> None:
    """Heartbeat / SyncGroup / LeaveGroup to groups that do not exist and EndTxn / AddPartitionsToTxn for ids that
    do not exist answer Kafka's codes and keep no lock, no group, no timer."""
    broker = await start_broker()
    groups, transactions = broker.node.groups, broker.node.transactions
    for i in range(2000):
        assert await groups.heartbeat(f"g{i}", 1, "m", None) == ErrorCode.UNKNOWN_MEMBER_ID
        error, *_ = await groups.sync_group(f"g{i}", 1, "m", None, None, None, {})
        assert error == ErrorCode.UNKNOWN_MEMBER_ID
        assert await groups.leave_group(f"g{i}", [("m", None)]) == (ErrorCode.NONE, [ErrorCode.UNKNOWN_MEMBER_ID])
        error, *_ = await transactions.end_transaction(f"t{i}", 1, 0, True, ErrorCode.PRODUCER_FENCED)
        assert error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
        error = await transactions.add_partitions(f"t{i}", 1, 0, [("x", 0)], ErrorCode.PRODUCER_FENCED)
        assert error == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert len(groups._locks) == 0 and len(transactions._locks) == 0
    assert groups.all() == [] and transactions.all() == []
    assert len(groups._timers) == 0 and len(transactions._timeouts) == 0 and len(transactions._expirations) == 0


async def test_idle_groups_are_not_scanned(start_broker, monkeypatch) -> None:
    """Offset-only groups have no deadline: the timer task never looks at them, however many there are."""
    broker = await start_broker()
    groups = broker.node.groups
    for i in range(500):
        groups._groups[f"idle{i}"] = Group(f"idle{i}")
    looked: list[str] = []
    original = groups._group_deadline
    monkeypatch.setattr(groups, "_group_deadline", lambda g: looked.append(g.group_id) or original(g))
    await trio.sleep(1.5)
    assert looked == []
    assert len(groups._timers) == 0


async def test_timers_still_fire_for_pending_members_and_join_phases(start_broker) -> None:
    """The deadlines the heap now carries: a MEMBER_ID_REQUIRED id expires after its session timeout, and a join
    phase ends at the rebalance timeout for a member that does not rejoin (the heap is the only wake-up left)."""
    broker = await start_broker(group_initial_rebalance_delay_ms="0", group_min_session_timeout_ms="100")
    groups = broker.node.groups

    def request(*, require_id: bool = True, session_ms: int = 200, rebalance_ms: int = 200) -> JoinRequest:
        return JoinRequest("g", "", None, require_id, "c", "h", rebalance_ms, session_ms, "consumer", [("r", b"")])

    pending = await groups.join_group(request())
    assert pending["error_code"] == ErrorCode.MEMBER_ID_REQUIRED
    assert list(groups.get("g").pending_members) == [pending["member_id"]]
    with trio.fail_after(5):
        while groups.get("g").pending_members:
            await trio.sleep(0.02)
    # One member joins and syncs; a second one joins, and the first never rejoins: the join phase ends at its
    # rebalance timeout without it.
    first = await groups.join_group(request(require_id=False, session_ms=10_000, rebalance_ms=300))
    assert first["error_code"] == ErrorCode.NONE
    await groups.sync_group("g", first["generation_id"], first["member_id"], None, None, None, {})
    with trio.fail_after(5):
        second = await groups.join_group(request(require_id=False, session_ms=10_000, rebalance_ms=300))
    assert second["error_code"] == ErrorCode.NONE
    assert [m["member_id"] for m in second["members"]] == [second["member_id"]]


async def test_transaction_checks_do_not_look_at_idle_ids(start_broker, monkeypatch) -> None:
    """Completed transactional ids are neither timeout candidates nor due for expiration: the periodic checks look
    at none of them (they used to test every id every 10 s)."""
    broker = await start_broker()
    transactions = broker.node.transactions
    for i in range(50):
        error, _pid, _epoch = await transactions.init_producer_id(f"t{i}", 60_000, -1, -1, ErrorCode.PRODUCER_FENCED)
        assert error == ErrorCode.NONE
    looked: list[str] = []
    real_is_expired = TransactionMetadata.is_expired
    monkeypatch.setattr(
        TransactionMetadata,
        "is_expired",
        lambda self, now: looked.append(self.transactional_id) or real_is_expired(self, now),
    )
    await transactions.abort_timed_out(now_ms())
    await transactions.expire_idle_ids(now_ms())
    assert looked == []
    assert len(transactions.all()) == 50
    assert len(transactions._expirations) == 50 and len(transactions._timeouts) == 0
    # Past transactional.id.expiration.ms they all go, from the heap alone.
    await transactions.expire_idle_ids(now_ms() + broker.node.config.get_int("transactional.id.expiration.ms") + 1)
    assert transactions.all() == [] and len(transactions._expirations) == 0
