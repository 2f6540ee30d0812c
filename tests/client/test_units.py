"""Client pieces without a broker: config validation, murmur2, read_committed filtering, state machine."""

from __future__ import annotations

import pytest
import sniffio
from oncelog.client import ConfigError, Consumer, IllegalStateError, Producer, TopicPartition
from oncelog.client.accumulator import ProducerBatch
from oncelog.client.fetch_parse import parse_partition
from oncelog.client.future import Future
from oncelog.client.partitioner import DefaultPartitioner, murmur2, partition_for_key
from oncelog.client.txn_manager import TransactionManager, TxnState
from oncelog.client.types import RecordMetadata
from oncelog.protocol.records import ControlType, SimpleRecord, encode_batch, encode_control_batch


@pytest.mark.anyio
async def test_backend_is_really_in_use(anyio_backend: str) -> None:
    assert sniffio.current_async_library() == anyio_backend


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"enable_idempotence": True, "retries": 0}, "enable.idempotence=true requires retries > 0"),
        ({"enable_idempotence": True, "acks": 1}, "enable.idempotence=true requires acks=all"),
        ({"enable_idempotence": True, "acks": "0"}, "enable.idempotence=true requires acks=all"),
        (
            {"max_in_flight_requests_per_connection": 6},
            "enable.idempotence=true requires max.in.flight.requests.per.connection <= 5; got 6",
        ),
        ({"transactional_id": "t", "enable_idempotence": False}, "transactional.id requires enable.idempotence=true"),
        ({"transactional_id": ""}, "transactional.id must not be empty"),
        ({"acks": "most"}, "acks must be one of all, -1, 0, 1; got 'most'"),
        ({"compression_type": "brotli"}, "compression.type must be one of none, gzip, snappy, lz4, zstd; got 'brotli'"),
        ({"linger_ms": -1}, "linger.ms must be >= 0"),
        ({"batch_size": 0}, "batch.size must be > 0"),
        ({"transaction_timeout_ms": 0}, "transaction.timeout.ms must be > 0"),
        (
            {"enable_idempotence": False, "max_in_flight_requests_per_connection": 0},
            "max.in.flight.requests.per.connection must be at least 1",
        ),
        ({"enable_idempotence": False, "retries": -1}, "retries must be >= 0"),
        ({"delivery_timeout_ms": 1000}, "delivery.timeout.ms must be >= linger.ms + request.timeout.ms"),
    ],
)
def test_producer_config_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        Producer("127.0.0.1:1", **kwargs)
    assert str(info.value) == message


def test_valid_non_idempotent_configs() -> None:
    p = Producer("127.0.0.1:1", enable_idempotence=False, acks=1, retries=0, max_in_flight_requests_per_connection=10)
    assert p.config.acks == 1
    assert p.transaction_state is None


@pytest.mark.anyio
@pytest.mark.parametrize(
    "method", ["init_transactions", "begin_transaction", "commit_transaction", "abort_transaction"]
)
async def test_transactional_methods_need_transactional_id(method: str) -> None:
    p = Producer("127.0.0.1:1")
    with pytest.raises(ConfigError, match=f"{method} requires transactional.id to be set"):
        await getattr(p, method)()


@pytest.mark.anyio
async def test_send_offsets_needs_transactional_id() -> None:
    p = Producer("127.0.0.1:1")
    with pytest.raises(ConfigError, match=r"send_offsets_to_transaction requires transactional\.id to be set"):
        await p.send_offsets_to_transaction({TopicPartition("t", 0): 1}, "g")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"isolation_level": "serializable"}, "isolation.level must be read_uncommitted or read_committed"),
        ({"auto_offset_reset": "smallest"}, "auto.offset.reset must be earliest, latest or none"),
        ({"enable_auto_commit": True}, "enable.auto.commit=true requires group.id"),
        ({"max_poll_records": 0}, "max.poll.records must be at least 1"),
    ],
)
def test_consumer_config_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Consumer("127.0.0.1:1", **kwargs)


def test_group_metadata_needs_group() -> None:
    with pytest.raises(ConfigError, match=r"group_metadata requires group\.id"):
        Consumer("127.0.0.1:1").group_metadata()
    assert Consumer("127.0.0.1:1", group_id="g").group_metadata().group_id == "g"


# Kafka's UtilsTest.testMurmur2 vectors (signed Java ints).
@pytest.mark.parametrize(
    ("key", "expected"),
    [
        (b"21", -973932308),
        (b"foobar", -790332482),
        (b"a-little-bit-long-string", -985981536),
        (b"a-little-bit-longer-string", -1486304829),
        (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
        (b"abc", 479470107),
    ],
)
def test_murmur2_matches_kafka(key: bytes, expected: int) -> None:
    assert murmur2(key) == expected & 0xFFFFFFFF


def test_partition_for_key_is_positive_modulo() -> None:
    assert partition_for_key(b"foobar", 7) == ((-790332482) & 0x7FFFFFFF) % 7
    assert all(0 <= partition_for_key(bytes([i]), 3) < 3 for i in range(256))


def test_sticky_partitioner_moves_on_full_batch() -> None:
    part = DefaultPartitioner()
    first = part("t", None, 4)
    assert all(part("t", None, 4) == first for _ in range(10))
    part.next_batch("t", 4, first)
    second = part("t", None, 4)
    assert second != first and 0 <= second < 4
    assert part("t", b"k", 4) == partition_for_key(b"k", 4)


def _data(offset: int, pid: int, values: list[bytes], *, transactional: bool) -> bytes:
    return encode_batch(
        [SimpleRecord(None, v, (), 1000) for v in values],
        base_offset=offset,
        producer_id=pid,
        producer_epoch=0,
        base_sequence=0,
        transactional=transactional,
    )


class _Aborted:
    def __init__(self, producer_id: int, first_offset: int) -> None:
        self.producer_id, self.first_offset = producer_id, first_offset


def _log() -> bytes:
    # 0-1 pid 7 (aborted), 2-3 pid 8 (committed), 4 ABORT(7), 5 COMMIT(8), 6 pid 7 again (committed later), 7 plain
    return b"".join(
        [
            _data(0, 7, [b"a0", b"a1"], transactional=True),
            _data(2, 8, [b"c0", b"c1"], transactional=True),
            encode_control_batch(
                ControlType.ABORT,
                coordinator_epoch=0,
                base_offset=4,
                producer_id=7,
                producer_epoch=0,
                timestamp_ms=1000,
            ),
            encode_control_batch(
                ControlType.COMMIT,
                coordinator_epoch=0,
                base_offset=5,
                producer_id=8,
                producer_epoch=0,
                timestamp_ms=1000,
            ),
            _data(6, 7, [b"n0"], transactional=True),
            _data(7, -1, [b"p"], transactional=False),
        ]
    )


def test_read_committed_drops_aborted_and_control() -> None:
    tp = TopicPartition("t", 0)
    records, nxt = parse_partition(tp, _log(), 0, read_committed=True, aborted_transactions=[_Aborted(7, 0)])
    assert [r.value for r in records] == [b"c0", b"c1", b"n0", b"p"]
    assert nxt == 8


def test_read_uncommitted_keeps_aborted_skips_control() -> None:
    records, nxt = parse_partition(
        TopicPartition("t", 0), _log(), 0, read_committed=False, aborted_transactions=[_Aborted(7, 0)]
    )
    assert [r.offset for r in records] == [0, 1, 2, 3, 6, 7]
    assert nxt == 8


def test_position_inside_a_batch_and_trailing_control() -> None:
    tp = TopicPartition("t", 0)
    records, nxt = parse_partition(tp, _log(), 1, read_committed=False)
    assert records[0].offset == 1
    records, nxt = parse_partition(
        tp, _log()[: len(_log())], 4, read_committed=True, aborted_transactions=[_Aborted(7, 0)]
    )
    assert [r.offset for r in records] == [6, 7]
    only_control = encode_control_batch(
        ControlType.COMMIT, coordinator_epoch=0, base_offset=9, producer_id=8, producer_epoch=0, timestamp_ms=1000
    )
    records, nxt = parse_partition(tp, only_control, 9, read_committed=True)
    assert records == [] and nxt == 10  # the position moves past a marker even though nothing is returned


def test_transition_table_rejects_illegal_moves() -> None:
    tm = TransactionManager(None, "x", transaction_timeout_ms=1000)  # type: ignore[arg-type]
    with pytest.raises(IllegalStateError):
        tm.transition(TxnState.IN_TRANSACTION)
    tm.transition(TxnState.INITIALIZING)
    tm.transition(TxnState.READY)
    with pytest.raises(IllegalStateError):
        tm.transition(TxnState.COMMITTING_TRANSACTION)
    tm.transition(TxnState.IN_TRANSACTION)
    tm.transition(TxnState.ABORTABLE_ERROR)
    with pytest.raises(IllegalStateError):
        tm.transition(TxnState.COMMITTING_TRANSACTION)
    tm.transition(TxnState.ABORTING_TRANSACTION)
    tm.transition(TxnState.READY)
    tm.transition(TxnState.FATAL_ERROR)
    with pytest.raises(IllegalStateError):
        tm.transition(TxnState.READY)


def test_a_batch_completes_a_future_shared_by_its_records_once_and_its_own_futures_each() -> None:
    shared, own = Future(), Future()
    batch = ProducerBatch(TopicPartition("t", 1), 0.0, 1.0)
    for record, fut in ((SimpleRecord(b"k", b"a", [], 5), shared), (SimpleRecord(b"k", b"b", [], 6), own)):
        batch.records.append(record)
        batch.futures.append(fut)
    batch.records.append(SimpleRecord(b"k", b"c", [], 7))
    batch.futures.append(shared)
    batch.complete(100, -1)
    assert shared.result() == RecordMetadata("t", 1, 100, 5)  # the first record's metadata, not overwritten
    assert own.result() == RecordMetadata("t", 1, 101, 6)
