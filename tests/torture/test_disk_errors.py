"""Full disks and I/O errors: Produce is answered KAFKA_STORAGE_ERROR, no partial batch ever becomes visible, the
broker keeps serving and recovers once space returns; injected EIO (``ONCELOG_FAULTS=storage.*:eio``) is reported the
same way and an idempotent retry then lands exactly once.

The full-disk test mounts an 8 MiB tmpfs (CI runs as root); it is skipped only when mounting is not permitted.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from support.broker import BrokerProcess
from support.topics import create_topic_confluent
from support.wire import EARLIEST_TIMESTAMP, Record, WireClient, encode_batch

KAFKA_STORAGE_ERROR = 56
TMPFS_SIZE = "8m"
BALLAST_BYTES = 4 * 1024 * 1024
VALUE_BYTES = 60 * 1024


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """An 8 MiB tmpfs mounted inside the test's tmp dir (skipped when mounting is not permitted)."""
    mount_point = tmp_path / "disk"
    mount_point.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mount_point
    finally:
        for _ in range(20):
            if subprocess.run(["umount", str(mount_point)], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)


def _batch(index: int, *, size: int = VALUE_BYTES, producer_id: int = -1, sequence: int = -1) -> bytes:
    value = (b"%08d" % index) * (size // 8)
    return encode_batch(
        [Record(b"k%d" % index, value)],
        producer_id=producer_id,
        producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=sequence,
    )


def _read_all(bootstrap: str, topic: str, expected: int) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of partition 0 (read_uncommitted), reading to the end."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "disk-unused",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_uncommitted",
            "fetch.message.max.bytes": 1 << 20,
        }
    )
    out: list[tuple[int, bytes]] = []
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        end = time.monotonic() + 30
        while time.monotonic() < end:
            messages = consumer.consume(500, timeout=0.5)
            if any(m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF for m in messages):
                out += [(m.offset(), m.value()) for m in messages if m.error() is None]
                if len(out) >= expected:
                    break
                continue
            for m in messages:
                assert m.error() is None, m.error()
                out.append((m.offset(), m.value()))
    finally:
        consumer.close()
    return out


def test_full_disk_rejects_produce_and_recovers(small_disk: Path) -> None:
    ballast = small_disk / "ballast"
    ballast.write_bytes(bytes(BALLAST_BYTES))
    broker = BrokerProcess(small_disk / "data", settings={"log.flush.offset.checkpoint.interval.ms": 200})
    try:
        broker.start()
        create_topic_confluent(broker.bootstrap, "full", 1)
        acked: list[int] = []  # the index stamped into each acknowledged batch, in offset order
        errors: list[int] = []
        with WireClient(broker.bootstrap) as client:
            for i in range(400):  # 8 MiB can hold far fewer than 400 x 60 KiB
                result = client.produce("full", 0, _batch(i))
                if result.error_code == 0:
                    assert result.base_offset == len(acked)
                    acked.append(i)
                else:
                    errors.append(result.error_code)
                    if len(errors) >= 5:
                        break
            assert errors and set(errors) == {KAFKA_STORAGE_ERROR}, errors
            assert len(acked) > 10
            time.sleep(0.5)  # checkpoints keep failing meanwhile; the broker must stay up
            assert broker.proc is not None and broker.proc.poll() is None, broker.stderr_tail()
            # Only whole acknowledged batches are visible: the high watermark is exactly the acknowledged count.
            assert client.list_offset("full", 0) == (0, len(acked))
            assert client.list_offset("full", 0, EARLIEST_TIMESTAMP) == (0, 0)
            small = client.produce("full", 0, _batch(10_000, size=8))  # may fit or not; never partial
            if small.error_code == 0:
                acked.append(10_000)
            else:
                assert small.error_code == KAFKA_STORAGE_ERROR

            ballast.unlink()  # space returns
            for i in range(5):
                result = client.produce("full", 0, _batch(20_000 + i))
                assert (result.error_code, result.base_offset) == (0, len(acked))
                acked.append(20_000 + i)
            assert client.list_offset("full", 0) == (0, len(acked))
        values = [v for _, v in _read_all(broker.bootstrap, "full", len(acked))]
        assert len(values) == len(acked)
        assert [v[:8] for v in values] == [b"%08d" % i for i in acked]

        broker.restart(hard=True)  # recovery after a crash with the disk having been full
        with WireClient(broker.bootstrap) as client:
            assert client.list_offset("full", 0) == (0, len(acked))
        assert len(_read_all(broker.bootstrap, "full", len(acked))) == len(acked)
    finally:
        with contextlib.suppress(RuntimeError):
            broker.kill()


@pytest.mark.parametrize("point", ["storage.append", "storage.fsync"])
def test_injected_eio_is_a_storage_error_and_the_retry_lands_once(tmp_path: Path, point: str) -> None:
    broker = BrokerProcess(tmp_path / "data", env={"ONCELOG_FAULTS": f"{point}:eio"})
    try:
        broker.start()
        create_topic_confluent(broker.bootstrap, "eio", 1)
        with WireClient(broker.bootstrap) as client:
            error, pid, _epoch = client.init_producer_id()
            assert error == 0
            first = _batch(0, size=64, producer_id=pid, sequence=0)
            assert client.produce("eio", 0, first).error_code == KAFKA_STORAGE_ERROR
            assert broker.proc is not None and broker.proc.poll() is None
            # The idempotent retry of the same batch succeeds at offset 0 and is stored once.
            retried = client.produce("eio", 0, first)
            assert (retried.error_code, retried.base_offset) == (0, 0)
            second = client.produce("eio", 0, _batch(1, size=64, producer_id=pid, sequence=1))
            assert (second.error_code, second.base_offset) == (0, 1)
            assert client.list_offset("eio", 0) == (0, 2)
        assert [v[:8] for _, v in _read_all(broker.bootstrap, "eio", 2)] == [b"00000000", b"00000001"]
    finally:
        broker.close()
