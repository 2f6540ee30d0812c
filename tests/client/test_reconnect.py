"""Reconnection: a broker restart in the middle of producing loses and duplicates nothing."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from oncelog.client import Admin, Consumer, Producer, TopicPartition
from support.broker import BrokerProcess


@pytest.mark.anyio
async def test_producer_and_consumer_survive_broker_restart(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        async with Admin(broker.bootstrap) as admin:
            await admin.create_topic("rs", 1)
        tp = TopicPartition("rs", 0)
        async with (
            Producer(broker.bootstrap, retry_backoff_ms=20) as p,
            Consumer(broker.bootstrap, auto_offset_reset="earliest") as c,
        ):
            c.assign([tp])
            first = [await p.send("rs", f"a{i}", partition=0) for i in range(50)]
            await p.flush()
            assert len((await c.getmany(timeout_ms=2000, max_records=50))[tp]) == 50
            await anyio.to_thread.run_sync(broker.restart)
            second = [await p.send("rs", f"b{i}", partition=0) for i in range(50)]
            with anyio.fail_after(20):
                await p.flush()
            offsets = [(await f).offset for f in first + second]
            assert offsets == list(range(100))
            got: list[bytes] = []
            with anyio.fail_after(20):
                while len(got) < 50:
                    got += [r.value for r in (await c.getmany(timeout_ms=500)).get(tp, [])]
            assert got == [f"b{i}".encode() for i in range(50)]
