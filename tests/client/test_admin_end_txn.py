"""Admin.end_transaction: ending a transaction from a process that holds only its ids (the Spark driver's case)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from oncelog.client import Admin, BrokerResponseError, Producer
from oncelog.protocol import ErrorCode

from .test_broker import consume_all

pytestmark = pytest.mark.anyio


async def test_end_transaction_commits_what_another_producer_left_open(
    bootstrap_servers: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic("admin-end", 1)
    tid = f"tid-{topic}"
    async with Producer(bootstrap_servers, transactional_id=tid) as p:
        await p.init_transactions()
        await p.begin_transaction()
        await p.send(topic, b"kept", partition=0)
        await p.flush()
        pid, epoch = p.producer_id_and_epoch
    # Closing the producer left the transaction open: nothing is visible to read_committed yet.
    assert await consume_all(bootstrap_servers, topic, 1, isolation="read_committed", timeout_s=1.0) == []
    async with Admin(bootstrap_servers) as admin:
        await admin.end_transaction(tid, pid, epoch, commit=True)
        await admin.end_transaction(tid, pid, epoch, commit=True)  # a repeated EndTxn with the same outcome
        with pytest.raises(BrokerResponseError) as raised:
            await admin.end_transaction(tid, pid, epoch, commit=False)  # the other outcome: refused, not retried
    assert raised.value.code is ErrorCode.INVALID_TXN_STATE
    committed = await consume_all(bootstrap_servers, topic, 1, isolation="read_committed", expect=1)
    assert [r.value for r in committed] == [b"kept"]
