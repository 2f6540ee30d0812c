"""Producer id blocks claimed concurrently by several brokers never overlap."""

from __future__ import annotations

import trio
from oncelog.broker.etcd.client import EtcdClient
from oncelog.broker.etcd.producer_id_blocks import claim_block
from support.etcd import EtcdProcess


async def test_concurrent_claims_are_disjoint_and_contiguous(etcd: EtcdProcess) -> None:
    key = "/test/pid-block"
    blocks: list[range] = []
    async with EtcdClient([etcd.url]) as client:

        async def broker(broker_id: int) -> None:
            for _ in range(10):
                blocks.append(await claim_block(client, key, broker_id=broker_id, size=100))

        with trio.fail_after(30):
            async with trio.open_nursery() as nursery:
                for broker_id in (1, 2, 3):
                    nursery.start_soon(broker, broker_id)
    ids = sorted(i for block in blocks for i in block)
    assert ids == list(range(3000))  # 30 blocks of 100: none shared, none lost


async def test_blocks_continue_after_etcd_restarts() -> None:
    with EtcdProcess() as server:
        async with EtcdClient([server.url]) as client:
            first = await claim_block(client, "/pid", broker_id=1)
            await trio.to_thread.run_sync(server.restart)
            second = await claim_block(client, "/pid", broker_id=2)
    assert first == range(0, 1000) and second == range(1000, 2000)
