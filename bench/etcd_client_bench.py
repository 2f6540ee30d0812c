"""The etcd client choice, measured: oncelog's httpx client on trio vs etcd3gw (blocking) in trio's worker threads.

Run: ``.venv/bin/python bench/etcd_client_bench.py [--ops 2000]`` (starts its own etcd on loopback ports; etcd3gw is
measured when it is installed: ``uv pip install etcd3gw``; it is not a dependency). Prints, per client, the p50 and
p99 latency of a single put and of a compare-and-swap txn, and puts/s with 32 concurrent tasks.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from oncelog.broker.etcd.client import Compare, EtcdClient, Put
from support.etcd import EtcdProcess

CONCURRENCY = 32


async def latencies(ops: int, call: Callable[[int], Awaitable[object]]) -> tuple[float, float]:
    samples = []
    for i in range(ops):
        start = time.perf_counter()
        await call(i)
        samples.append((time.perf_counter() - start) * 1000)
    quantiles = statistics.quantiles(samples, n=100)
    return quantiles[49], quantiles[98]


async def throughput(ops: int, call: Callable[[int], Awaitable[object]]) -> float:
    start = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for worker in range(CONCURRENCY):

            async def run(worker: int = worker) -> None:
                for i in range(worker, ops, CONCURRENCY):
                    await call(i)

            nursery.start_soon(run)
    return ops / (time.perf_counter() - start)


async def measure_httpx(url: str, ops: int) -> dict[str, float]:
    async with EtcdClient([url]) as client:
        await client.put("/bench/cas", b"0")

        async def put(i: int) -> None:
            await client.put(f"/bench/httpx/{i % 100}", b"x" * 100)

        async def cas(i: int) -> None:
            kv = await client.get("/bench/cas")
            await client.txn([Compare.unchanged(kv)], [Put("/bench/cas", str(i).encode())])

        put_p50, put_p99 = await latencies(ops, put)
        cas_p50, cas_p99 = await latencies(ops // 2, cas)
        return {
            "put_p50_ms": put_p50,
            "put_p99_ms": put_p99,
            "cas_p50_ms": cas_p50,
            "cas_p99_ms": cas_p99,
            "puts_per_s": await throughput(ops, put),
        }


async def measure_etcd3gw(endpoint: str, ops: int) -> dict[str, float] | None:
    try:
        import etcd3gw  # type: ignore[import-not-found]
        from etcd3gw.utils import _encode  # type: ignore[import-not-found]
    except ImportError:
        return None
    host, port = endpoint.split(":")
    client = etcd3gw.client(host=host, port=int(port))
    limiter = trio.CapacityLimiter(CONCURRENCY)
    client.put("/bench/cas", "0")

    async def put(i: int) -> None:
        await trio.to_thread.run_sync(client.put, f"/bench/gw/{i % 100}", "x" * 100, limiter=limiter)

    def cas_blocking(i: int) -> None:
        [(_value, meta)] = client.get("/bench/cas", metadata=True)
        client.transaction(
            {
                "compare": [
                    {
                        "key": _encode("/bench/cas"),
                        "result": "EQUAL",
                        "target": "MOD",
                        "mod_revision": meta["mod_revision"],
                    }
                ],
                "success": [{"request_put": {"key": _encode("/bench/cas"), "value": _encode(str(i))}}],
                "failure": [],
            }
        )

    async def cas(i: int) -> None:
        await trio.to_thread.run_sync(cas_blocking, i, limiter=limiter)

    put_p50, put_p99 = await latencies(ops, put)
    cas_p50, cas_p99 = await latencies(ops // 2, cas)
    return {
        "put_p50_ms": put_p50,
        "put_p99_ms": put_p99,
        "cas_p50_ms": cas_p50,
        "cas_p99_ms": cas_p99,
        "puts_per_s": await throughput(ops, put),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000)
    args = parser.parse_args()
    with EtcdProcess() as etcd:
        rows = {
            "oncelog httpx (trio)": trio.run(measure_httpx, etcd.url, args.ops),
            "etcd3gw (threads)": trio.run(measure_etcd3gw, etcd.endpoint, args.ops),
        }
    print(f"{'client':24} {'put p50':>8} {'put p99':>8} {'cas p50':>8} {'cas p99':>8} {'puts/s (32 tasks)':>18}")
    for name, row in rows.items():
        if row is None:
            print(f"{name:24} not installed")
            continue
        print(
            f"{name:24} {row['put_p50_ms']:8.2f} {row['put_p99_ms']:8.2f} {row['cas_p50_ms']:8.2f} "
            f"{row['cas_p99_ms']:8.2f} {row['puts_per_s']:18.0f}"
        )


if __name__ == "__main__":
    main()
