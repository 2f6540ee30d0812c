"""The driver half of the exactly-once write: end (commit or abort) the transactions tasks left open.

A Spark driver holds just the task's (transactional.id, producer id, epoch), not the producer that began the
transaction; that is all EndTxn needs, and the client's ``Admin.end_transaction`` sends it (retrying coordinator
moves and busy coordinators).

Guarantees: :func:`end_transactions` ends every given open transaction or raises; committing a transaction that
is already committed with the same producer id/epoch succeeds (the coordinator answers a repeated EndTxn with the
same outcome); :func:`commit_batch` then aborts what an earlier run of the query left open; a transaction that
the coordinator aborted in the meantime (timeout, fencing) raises :class:`TransactionEndError`, so the batch fails
and Spark replays it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import anyio
from oncelog.client import Admin, KafkaError, KafkaTimeoutError, Producer
from oncelog.pipeline.options import SinkOptions

END_TXN_TIMEOUT_S = 60.0  # how long one EndTxn may be retried (max.block.ms, Kafka default 60000)
RETRY_BACKOFF_S = 0.05


@dataclass(frozen=True)
class TaskCommit:
    """What a task hands to the driver: the open transaction to end, or ``skipped`` when the marker showed the
    batch already committed (``transactional_id`` is then still set, ``producer_id`` is -1)."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partition_id: int
    batch_id: int
    rows: int
    skipped: bool = False


class TransactionEndError(KafkaError):
    """A task's transaction could not be ended as asked."""


async def _end_one(admin: Admin, msg: TaskCommit, commit: bool, errors: list[BaseException]) -> None:
    try:
        await admin.end_transaction(
            msg.transactional_id,
            msg.producer_id,
            msg.producer_epoch,
            commit=commit,
            max_block_ms=int(END_TXN_TIMEOUT_S * 1000),
            retry_backoff_ms=int(RETRY_BACKOFF_S * 1000),
        )
    except KafkaTimeoutError:
        errors.append(TransactionEndError(f"EndTxn for {msg.transactional_id} timed out"))
    except KafkaError as exc:
        errors.append(
            TransactionEndError(
                f"EndTxn(commit={commit}) for {msg.transactional_id} (batch {msg.batch_id}, partition "
                f"{msg.partition_id}, producer {msg.producer_id}/{msg.producer_epoch}): "
                f"{exc.code.name if exc.code is not None else exc}",
                exc.code,
            )
        )


async def _end_with(admin: Admin, messages: list[TaskCommit], commit: bool) -> list[BaseException]:
    errors: list[BaseException] = []
    async with anyio.create_task_group() as tg:
        for msg in messages:
            tg.start_soon(_end_one, admin, msg, commit, errors)
    return errors


async def _end_all(bootstrap: str, messages: list[TaskCommit], commit: bool) -> list[BaseException]:
    async with Admin(bootstrap, client_id="oncelog-spark-driver") as admin:
        return await _end_with(admin, messages, commit)


def open_transactions(messages: Iterable[object]) -> list[TaskCommit]:
    """The task messages that left a transaction open (skipped, empty and failed tasks left none)."""
    return [m for m in messages if isinstance(m, TaskCommit) and m.producer_id >= 0]


def end_transactions(bootstrap: str, messages: Iterable[object], *, commit: bool) -> int:
    """Commit (or abort) every open transaction among ``messages``; returns how many; raises the first error
    after trying them all."""
    todo = open_transactions(messages)
    if not todo:
        return 0
    errors = anyio.run(_end_all, bootstrap, todo, commit)
    if errors:
        raise errors[0]
    return len(todo)


async def _fence_dangling(admin: Admin, sink: SinkOptions, keep: frozenset[str]) -> list[str]:
    listed = await admin.list_transactions(states=["Ongoing"])
    fenced = sorted(
        t.transactional_id
        for t in listed
        if t.transactional_id.startswith(sink.transactional_id_prefix) and t.transactional_id not in keep
    )
    for tid in fenced:  # InitProducerId bumps the epoch and aborts the open transaction
        async with Producer(sink.bootstrap, transactional_id=tid, client_id="oncelog-spark-driver") as producer:
            await producer.init_transactions()
    return fenced


async def _commit_batch(sink: SinkOptions, messages: list[object]) -> list[BaseException]:
    todo = open_transactions(messages)
    keep = frozenset(m.transactional_id for m in messages if isinstance(m, TaskCommit))
    async with Admin(sink.bootstrap, client_id="oncelog-spark-driver") as admin:
        errors = await _end_with(admin, todo, True) if todo else []
        if not errors:
            await _fence_dangling(admin, sink, keep)
    return errors


def commit_batch(sink: SinkOptions, messages: Iterable[object]) -> None:
    """The driver's commit of one batch (or batch job): :func:`end_transactions` with ``commit=True``, then, every
    task of the batch having reported, aborts every open transaction of this query but the batch's own (any other
    open transaction of this query was left by a run that died and would hold back the output's LSO until
    transaction.timeout.ms). One connection for both; raises the first EndTxn error (after trying them all), and
    then fences nothing."""
    errors = anyio.run(_commit_batch, sink, list(messages))
    if errors:
        raise errors[0]
