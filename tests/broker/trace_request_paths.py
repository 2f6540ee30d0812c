"""Which of oncelog's source files run while one Produce, and one EndTxn, is handled (docs/ARCHITECTURE.md, "Files a
request passes through"). Not part of the suite (no ``test_`` prefix); run it by hand:

    .venv/bin/pytest -q -s -p no:cacheprovider tests/broker/trace_request_paths.py

It starts an in-process broker (no embedded DelayService, whose client would add its own files), warms it up, then
records the file of every Python function called, in every thread, while the request is handled: Produce (acks=-1,
answered once fsynced) and EndTxn (commit, with a moment after the answer for the markers). The fsync itself runs in
the helper process (``broker/sync_helper.py``), which is not traced.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any

import trio
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import SimpleRecord, encode_batch

from broker.helpers import batch, create_topic_body, produce_body

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "traced"
TXN = "traced-txn"
#: How long EndTxn's trace goes on after its answer: the markers are written after it.
MARKERS_S = 0.3


class FileTracer:
    """The repository's source files (tests excluded) whose functions are called while it is entered."""

    def __init__(self) -> None:
        self.files: set[str] = set()

    def _hook(self, frame: FrameType, event: str, _arg: Any) -> None:
        name = frame.f_code.co_filename
        if event == "call" and name.startswith(str(ROOT)) and "/tests/" not in name and "/.venv/" not in name:
            self.files.add(os.path.relpath(name, ROOT))

    def __enter__(self) -> FileTracer:
        threading.setprofile(self._hook)
        sys.setprofile(self._hook)
        return self

    def __exit__(self, *_exc: object) -> None:
        sys.setprofile(None)
        threading.setprofile(None)


def _report(request: str, files: set[str]) -> None:
    print(f"\n{request}: {len(files)} files")
    for name in sorted(files):
        print(f"  {name}")


async def test_trace_produce_and_end_txn(start_broker: Callable) -> None:
    broker = await start_broker(delay_service_enable="false")
    client = await broker.connect()
    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body(TOPIC, 1))
    for _ in range(2):
        await client.request(ApiKey.PRODUCE, 9, produce_body(TOPIC, 0, batch([b"warm"])))
    await trio.sleep(0.2)
    with FileTracer() as produce:
        response = await client.request(ApiKey.PRODUCE, 9, produce_body(TOPIC, 0, batch([b"traced"])))
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    _report("Produce", produce.files)

    init_body = {"transactional_id": TXN, "transaction_timeout_ms": 60000, "producer_id": -1, "producer_epoch": -1}
    init = await client.request(ApiKey.INIT_PRODUCER_ID, 4, init_body)
    assert init.error_code == ErrorCode.NONE
    pid, epoch = init.producer_id, init.producer_epoch
    add_body = {
        "v3_and_below_transactional_id": TXN,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": TOPIC, "partitions": [0]}],
    }
    await client.request(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_body)
    records = encode_batch(
        [SimpleRecord(b"k", b"v")], producer_id=pid, producer_epoch=epoch, base_sequence=0, transactional=True
    )
    response = await client.request(ApiKey.PRODUCE, 9, {**produce_body(TOPIC, 0, records), "transactional_id": TXN})
    assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    await trio.sleep(0.2)
    end_body = {"transactional_id": TXN, "producer_id": pid, "producer_epoch": epoch, "committed": True}
    with FileTracer() as end_txn:
        assert (await client.request(ApiKey.END_TXN, 3, end_body)).error_code == ErrorCode.NONE
        await trio.sleep(MARKERS_S)
    _report("EndTxn", end_txn.files)
