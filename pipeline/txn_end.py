"""The driver half of the exactly-once write: end (commit or abort) the transactions tasks left open.

The bundled client only ends a transaction from the producer that began it; a Spark driver holds just the task's
(transactional.id, producer id, epoch), which is all EndTxn needs. So this module sends EndTxn itself over the
client's connection layer.

Guarantees: :func:`end_transactions` ends every given open transaction or raises; committing a transaction that
is already committed with the same producer id/epoch succeeds (the coordinator answers a repeated EndTxn with the
same outcome); :func:`fence_dangling` aborts what an earlier run left open; a transaction that the coordinator
aborted in the meantime (timeout, fencing) raises :class:`TransactionEndError`, so the batch fails and Spark
replays it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

import anyio
from oncelog.client import Admin, Producer
from oncelog.client.cluster import COORDINATOR_TRANSACTION, Cluster
from oncelog.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError
from oncelog.pipeline.options import SinkOptions
from oncelog.pipeline.txn_task import TaskCommit
from oncelog.protocol import ApiKey, ErrorCode

END_TXN_TIMEOUT_S = 60.0  # how long one EndTxn may be retried (max.block.ms, Kafka default 60000)
RETRY_BACKOFF_S = 0.05
_RETRY = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
        ErrorCode.CONCURRENT_TRANSACTIONS,
    }
)
_MOVED = frozenset({ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE})


class TransactionEndError(KafkaError):
    """A task's transaction could not be ended as asked."""


async def _end_one(cluster: Cluster, msg: TaskCommit, commit: bool, errors: list[BaseException]) -> None:
    body = {
        "transactional_id": msg.transactional_id,
        "producer_id": msg.producer_id,
        "producer_epoch": msg.producer_epoch,
        "committed": commit,
    }
    deadline = time.monotonic() + END_TXN_TIMEOUT_S
    while True:
        code: ErrorCode | None
        try:
            node = await cluster.coordinator(COORDINATOR_TRANSACTION, msg.transactional_id)
            code = ErrorCode((await cluster.request(node, ApiKey.END_TXN, body)).error_code)
        except (KafkaConnectionError, KafkaTimeoutError):
            cluster.forget_coordinator(COORDINATOR_TRANSACTION, msg.transactional_id)
            code = None
        if code is ErrorCode.NONE:
            return
        if code is not None and code not in _RETRY:
            errors.append(
                TransactionEndError(
                    f"EndTxn(commit={commit}) for {msg.transactional_id} (batch {msg.batch_id}, partition "
                    f"{msg.partition_id}, producer {msg.producer_id}/{msg.producer_epoch}): {code.name}",
                    code,
                )
            )
            return
        if code in _MOVED or code is None:
            cluster.forget_coordinator(COORDINATOR_TRANSACTION, msg.transactional_id)
        if time.monotonic() > deadline:
            errors.append(TransactionEndError(f"EndTxn for {msg.transactional_id} timed out"))
            return
        await anyio.sleep(RETRY_BACKOFF_S)


async def _end_all(bootstrap: str, messages: list[TaskCommit], commit: bool) -> list[BaseException]:
    errors: list[BaseException] = []
    async with Cluster(bootstrap, client_id="oncelog-spark-driver") as cluster, anyio.create_task_group() as tg:
        for msg in messages:
            tg.start_soon(_end_one, cluster, msg, commit, errors)
    return errors


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


async def _fence_dangling(sink: SinkOptions, keep: frozenset[str]) -> list[str]:
    async with Admin(sink.bootstrap) as admin:
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


def fence_dangling(sink: SinkOptions, keep: Iterable[str] = ()) -> list[str]:
    """Abort every open transaction of this query except those of ``keep`` (call when no other task of the query
    can be running: they were left by a driver or task that died). Returns the transactional ids it fenced."""
    return anyio.run(_fence_dangling, sink, frozenset(keep))
