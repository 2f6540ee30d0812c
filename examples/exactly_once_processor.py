"""ExactlyOnceMessageProcessor: a consume-transform-produce loop with exactly-once output.

    python examples/exactly_once_processor.py --bootstrap 127.0.0.1:9092 --input orders --output invoices

Reads ``--input`` with read_committed as a member of ``--group``, writes one output record per input record, and
commits the consumed offsets in the same transaction as the output (send_offsets_to_transaction). If the process
dies at any point, a restart resumes from the last committed transaction: nothing is lost and nothing is written
twice as far as read_committed readers can tell. Stops after ``--idle-seconds`` without input.
"""

from __future__ import annotations

import argparse

import anyio
from oncelog.client import AbortableTransactionError, Consumer, ConsumerRecord, Producer


class ExactlyOnceMessageProcessor:
    """One processing instance; run several with distinct ``instance`` values to share the input's partitions."""

    def __init__(self, bootstrap: str, input_topic: str, output_topic: str, group: str, instance: int = 0) -> None:
        self.input_topic, self.output_topic = input_topic, output_topic
        self.consumer = Consumer(
            bootstrap, group_id=group, isolation_level="read_committed", auto_offset_reset="earliest"
        )
        # One transactional id per instance: a restarted instance fences its own zombie.
        self.producer = Producer(bootstrap, transactional_id=f"{group}-processor-{instance}")

    def transform(self, record: ConsumerRecord) -> tuple[bytes | None, bytes]:
        return record.key, b"invoice for " + (record.value or b"")

    async def run(self, idle_seconds: float) -> int:
        processed = 0
        async with self.consumer, self.producer:
            self.consumer.subscribe([self.input_topic])
            await self.producer.init_transactions()
            idle_since = anyio.current_time()
            while anyio.current_time() - idle_since < idle_seconds:
                batch = await self.consumer.getmany(timeout_ms=500, max_records=200)
                if not batch:
                    continue
                idle_since = anyio.current_time()
                await self.producer.begin_transaction()
                try:
                    for records in batch.values():
                        for record in records:
                            key, value = self.transform(record)
                            await self.producer.send(self.output_topic, value, key)
                    offsets = {tp: records[-1].offset + 1 for tp, records in batch.items()}
                    await self.producer.send_offsets_to_transaction(offsets, self.consumer.group_metadata())
                    await self.producer.commit_transaction()
                    processed += sum(len(r) for r in batch.values())
                except AbortableTransactionError:
                    await self.producer.abort_transaction()
                    for tp in batch:  # reprocess from the last committed offsets
                        committed = await self.consumer.committed(tp)
                        if committed is not None:
                            self.consumer.seek(tp, committed)
                        else:
                            await self.consumer.seek_to_beginning(tp)
        return processed


async def main(args: argparse.Namespace) -> None:
    processor = ExactlyOnceMessageProcessor(args.bootstrap, args.input, args.output, args.group)
    print(f"processed {await processor.run(args.idle_seconds)} records")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="127.0.0.1:9092")
    parser.add_argument("--input", default="orders")
    parser.add_argument("--output", default="invoices")
    parser.add_argument("--group", default="invoicer")
    parser.add_argument("--idle-seconds", type=float, default=3.0)
    anyio.run(main, parser.parse_args())
