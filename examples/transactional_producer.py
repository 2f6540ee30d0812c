"""A transactional producer: each batch of records is committed atomically, or not at all.

    python examples/transactional_producer.py --bootstrap 127.0.0.1:9092 --topic orders --batches 3

Start a broker first (``oncelog broker``). Read the result with ``oncelog consume orders --from-beginning
--isolation read_committed``: the batch the script aborts on purpose never shows up.
"""

from __future__ import annotations

import argparse

import anyio
from oncelog.client import Admin, KafkaError, Producer


async def main(bootstrap: str, topic: str, batches: int, per_batch: int) -> None:
    async with Admin(bootstrap) as admin:
        if topic not in await admin.list_topics():
            await admin.create_topic(topic, 3)
    async with Producer(bootstrap, transactional_id=f"example-{topic}", compression_type="zstd") as producer:
        await producer.init_transactions()  # fences any older producer with the same transactional id
        for n in range(batches + 1):
            await producer.begin_transaction()
            for i in range(per_batch):
                await producer.send(topic, f"order {n}-{i}", key=f"customer-{i % 5}")
            if n == batches:  # the last batch demonstrates an abort
                await producer.abort_transaction()
                print(f"batch {n}: aborted")
                continue
            try:
                await producer.commit_transaction()  # flushes, then commits
                print(f"batch {n}: committed {per_batch} records")
            except KafkaError as exc:
                print(f"batch {n}: {exc}; aborting")
                await producer.abort_transaction()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="orders")
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--per-batch", type=int, default=10)
    args = parser.parse_args()
    anyio.run(main, args.bootstrap, args.topic, args.batches, args.per_batch)
