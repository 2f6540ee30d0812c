"""The transaction coordinator through the wire: the state machine, fencing, markers, LSO and aborted ranges."""

from __future__ import annotations

import trio
from oncelog.broker.clock import now_ms
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import iter_batches

from broker.helpers import batch, create_topic_body, fetch_body, list_offsets_body

TXN = "txn-1"
READ_COMMITTED = 1


async def _init(client, txn: str = TXN, timeout_ms: int = 60000, version: int = 4, pid: int = -1, epoch: int = -1):
    body = {"transactional_id": txn, "transaction_timeout_ms": timeout_ms, "producer_id": pid, "producer_epoch": epoch}
    return await client.request(ApiKey.INIT_PRODUCER_ID, version, body)


async def _init_ok(client, txn: str = TXN, **kwargs) -> tuple[int, int]:
    for _ in range(50):
        response = await _init(client, txn, **kwargs)
        if response.error_code != ErrorCode.CONCURRENT_TRANSACTIONS:
            break
        await trio.sleep(0.05)
    assert response.error_code == ErrorCode.NONE
    return response.producer_id, response.producer_epoch


async def _add(client, pid: int, epoch: int, partitions: list[tuple[str, int]], txn: str = TXN, version: int = 3):
    topics: dict[str, list[int]] = {}
    for topic, partition in partitions:
        topics.setdefault(topic, []).append(partition)
    body = {
        "v3_and_below_transactional_id": txn,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
    }
    response = await client.request(ApiKey.ADD_PARTITIONS_TO_TXN, version, body)
    return {
        (t.name, r.partition_index): r.partition_error_code
        for t in response.results_by_topic_v3_and_below
        for r in t.results_by_partition
    }


async def _end(client, pid: int, epoch: int, commit: bool, txn: str = TXN, version: int = 3) -> int:
    body = {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch, "committed": commit}
    return (await client.request(ApiKey.END_TXN, version, body)).error_code


async def _produce_txn(client, topic, partition, values, pid, epoch, seq, txn: str = TXN):
    records = batch(values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)
    body = {
        "transactional_id": txn,
        "acks": -1,
        "timeout_ms": 30000,
        "topic_data": [{"name": topic, "partition_data": [{"index": partition, "records": records}]}],
    }
    response = await client.request(ApiKey.PRODUCE, 7, body)
    return response.responses[0].partition_responses[0]


async def _fetch(client, topic, partition, isolation):
    response = await client.request(ApiKey.FETCH, 11, fetch_body(topic, partition, 0, isolation_level=isolation))
    return response.responses[0].partitions[0]


def _values(records: bytes) -> list[bytes]:
    return [r.value for header, records_ in iter_batches(records) if not header.is_control for r in records_]


async def test_find_coordinator_names_this_broker(broker, client) -> None:
    response = await client.request(ApiKey.FIND_COORDINATOR, 1, {"key": TXN, "key_type": 1})
    assert (response.error_code, response.port) == (ErrorCode.NONE, broker.port)
    response = await client.request(ApiKey.FIND_COORDINATOR, 4, {"key_type": 1, "coordinator_keys": ["a", "b"]})
    assert [(c.key, c.error_code, c.port) for c in response.coordinators] == [
        ("a", ErrorCode.NONE, broker.port),
        ("b", ErrorCode.NONE, broker.port),
    ]


async def test_commit_makes_records_visible_to_read_committed(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("t", partitions=2))
    pid, epoch = await _init_ok(client)
    assert await _add(client, pid, epoch, [("t", 0), ("t", 1)]) == {("t", 0): 0, ("t", 1): 0}
    assert (await _produce_txn(client, "t", 0, [b"a", b"b"], pid, epoch, 0)).error_code == ErrorCode.NONE
    assert (await _produce_txn(client, "t", 1, [b"c"], pid, epoch, 0)).error_code == ErrorCode.NONE
    open_read = await _fetch(client, "t", 0, READ_COMMITTED)
    assert (open_read.last_stable_offset, _values(open_read.records)) == (0, [])
    assert _values((await _fetch(client, "t", 0, 0)).records) == [b"a", b"b"]
    latest = await client.request(ApiKey.LIST_OFFSETS, 3, list_offsets_body("t", 0, -1, READ_COMMITTED))
    assert latest.topics[0].partitions[0].offset == 0

    assert await _end(client, pid, epoch, commit=True) == ErrorCode.NONE
    committed = await _fetch(client, "t", 0, READ_COMMITTED)
    assert _values(committed.records) == [b"a", b"b"]
    assert committed.last_stable_offset == 3  # two records and the COMMIT marker
    assert list(committed.aborted_transactions) == []
    assert _values((await _fetch(client, "t", 1, READ_COMMITTED)).records) == [b"c"]
    # A retried commit succeeds; an abort of the completed transaction is refused.
    assert await _end(client, pid, epoch, commit=True) == ErrorCode.NONE
    assert await _end(client, pid, epoch, commit=False) == ErrorCode.INVALID_TXN_STATE


async def test_abort_reports_the_aborted_range(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("ab"))
    pid, epoch = await _init_ok(client)
    await _add(client, pid, epoch, [("ab", 0)])
    await _produce_txn(client, "ab", 0, [b"x", b"y"], pid, epoch, 0)
    assert await _end(client, pid, epoch, commit=False) == ErrorCode.NONE
    read = await _fetch(client, "ab", 0, READ_COMMITTED)
    assert [(a.producer_id, a.first_offset) for a in read.aborted_transactions] == [(pid, 0)]
    assert read.last_stable_offset == 3
    # The next transaction of the same producer commits normally.
    await _add(client, pid, epoch, [("ab", 0)])
    await _produce_txn(client, "ab", 0, [b"z"], pid, epoch, 2)
    assert await _end(client, pid, epoch, commit=True) == ErrorCode.NONE
    read = await _fetch(client, "ab", 0, READ_COMMITTED)
    assert read.last_stable_offset == 5


async def test_write_to_a_partition_not_in_the_transaction_is_rejected(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("np", partitions=2))
    pid, epoch = await _init_ok(client)
    await _add(client, pid, epoch, [("np", 0)])
    response = await _produce_txn(client, "np", 1, [b"x"], pid, epoch, 0)
    assert response.error_code == ErrorCode.INVALID_TXN_STATE
    read = await _fetch(client, "np", 1, 0)
    assert (read.high_watermark, read.last_stable_offset) == (0, 0)


async def test_new_producer_fences_the_old_one_and_aborts_its_transaction(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("fence"))
    pid, epoch = await _init_ok(client)
    await _add(client, pid, epoch, [("fence", 0)])
    await _produce_txn(client, "fence", 0, [b"zombie"], pid, epoch, 0)
    first_try = await _init(client)
    assert first_try.error_code == ErrorCode.CONCURRENT_TRANSACTIONS
    new_pid, new_epoch = await _init_ok(client)
    assert (new_pid, new_epoch) == (pid, epoch + 2)
    assert await _end(client, pid, epoch, commit=True) == ErrorCode.PRODUCER_FENCED
    assert await _end(client, pid, epoch, commit=True, version=1) == ErrorCode.INVALID_PRODUCER_EPOCH
    stale = await _produce_txn(client, "fence", 0, [b"late"], pid, epoch, 1)
    assert stale.error_code in (ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.INVALID_TXN_STATE)
    read = await _fetch(client, "fence", 0, READ_COMMITTED)
    assert _values(read.records) == [b"zombie"] and len(read.aborted_transactions) == 1


async def test_coordinator_errors(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("err"))
    assert (await _init(client, timeout_ms=900001)).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert (await _init(client, timeout_ms=0)).error_code == ErrorCode.INVALID_TRANSACTION_TIMEOUT
    assert (await _init(client, txn="")).error_code == ErrorCode.INVALID_REQUEST
    pid, epoch = await _init_ok(client)
    assert await _add(client, pid + 1, epoch, [("err", 0)]) == {("err", 0): ErrorCode.INVALID_PRODUCER_ID_MAPPING}
    assert await _add(client, pid, epoch + 1, [("err", 0)]) == {("err", 0): ErrorCode.PRODUCER_FENCED}
    assert await _add(client, pid, epoch + 1, [("err", 0)], version=1) == {("err", 0): ErrorCode.INVALID_PRODUCER_EPOCH}
    assert await _add(client, pid, epoch, [("err", 0), ("nope", 0)]) == {
        ("err", 0): ErrorCode.OPERATION_NOT_ATTEMPTED,
        ("nope", 0): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert await _end(client, pid, epoch, commit=True) == ErrorCode.INVALID_TXN_STATE  # Empty: nothing to end
    assert await _end(client, pid, epoch, commit=True, txn="unknown") == ErrorCode.INVALID_PRODUCER_ID_MAPPING


async def test_kip_360_epoch_bump_with_expected_producer(client) -> None:
    pid, epoch = await _init_ok(client)
    bumped = await _init(client, pid=pid, epoch=epoch)
    assert (bumped.error_code, bumped.producer_id, bumped.producer_epoch) == (ErrorCode.NONE, pid, epoch + 1)
    retried = await _init(client, pid=pid, epoch=epoch)  # the answer to the bump was lost: same epoch again
    assert (retried.error_code, retried.producer_epoch) == (ErrorCode.NONE, epoch + 1)
    fenced = await _init(client, pid=pid + 999, epoch=0)
    assert fenced.error_code == ErrorCode.PRODUCER_FENCED


async def test_add_offsets_adds_the_group_offsets_partition(client) -> None:
    pid, epoch = await _init_ok(client)
    body = {"transactional_id": TXN, "producer_id": pid, "producer_epoch": epoch, "group_id": "g"}
    assert (await client.request(ApiKey.ADD_OFFSETS_TO_TXN, 0, body)).error_code == ErrorCode.NONE
    described = await client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [TXN]})
    assert [t.topic for t in described.transaction_states[0].topics] == ["__consumer_offsets"]
    # As in Kafka the partition is only computed: the topic is not created here (a group lookup creates it), and the
    # transaction commits at once, the marker of a partition whose topic does not exist skipped.
    metadata = await client.request(ApiKey.METADATA, 9, {"topics": None, "allow_auto_topic_creation": False})
    assert "__consumer_offsets" not in {t.name for t in metadata.topics}
    assert await _end(client, pid, epoch, commit=True) == ErrorCode.NONE
    described = await client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [TXN]})
    assert described.transaction_states[0].transaction_state == "CompleteCommit"


async def test_timed_out_transaction_is_aborted_and_fenced(start_broker) -> None:
    broker = await start_broker(**{"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
    client = await broker.connect()
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("slow"))
    pid, epoch = await _init_ok(client, timeout_ms=300)
    await _add(client, pid, epoch, [("slow", 0)])
    await _produce_txn(client, "slow", 0, [b"hung"], pid, epoch, 0)
    with trio.fail_after(5):
        while (await _fetch(client, "slow", 0, READ_COMMITTED)).last_stable_offset == 0:
            await trio.sleep(0.05)
    read = await _fetch(client, "slow", 0, READ_COMMITTED)
    assert read.last_stable_offset == 2 and len(read.aborted_transactions) == 1
    assert await _end(client, pid, epoch, commit=True) == ErrorCode.PRODUCER_FENCED


async def test_state_survives_restart(start_broker, tmp_path) -> None:
    data = tmp_path / "txn-data"
    broker = await start_broker(data)
    client = await broker.connect()
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("r", partitions=2))
    pid, epoch = await _init_ok(client)
    await _add(client, pid, epoch, [("r", 0)])
    await _produce_txn(client, "r", 0, [b"1"], pid, epoch, 0)
    await _end(client, pid, epoch, commit=True)
    await _add(client, pid, epoch, [("r", 1)])
    await _produce_txn(client, "r", 1, [b"open"], pid, epoch, 0)
    await broker.stop()

    broker = await start_broker(data)
    client = await broker.connect()
    assert (await _fetch(client, "r", 1, READ_COMMITTED)).last_stable_offset == 0  # still open
    assert await _end(client, pid, epoch, commit=False) == ErrorCode.NONE
    read = await _fetch(client, "r", 1, READ_COMMITTED)
    assert read.last_stable_offset == 2 and len(read.aborted_transactions) == 1
    assert _values((await _fetch(client, "r", 0, READ_COMMITTED)).records) == [b"1"]
    new_pid, new_epoch = await _init_ok(client)
    assert (new_pid, new_epoch) == (pid, epoch + 1)


async def test_admin_lists_and_describes_transactions_and_producers(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("adm"))
    pid, epoch = await _init_ok(client)
    await _add(client, pid, epoch, [("adm", 0)])
    await _produce_txn(client, "adm", 0, [b"a"], pid, epoch, 0)
    listed = await client.request(
        ApiKey.LIST_TRANSACTIONS,
        1,
        {"state_filters": ["Ongoing", "Bogus"], "producer_id_filters": [], "duration_filter": -1},
    )
    assert [(t.transactional_id, t.transaction_state) for t in listed.transaction_states] == [(TXN, "Ongoing")]
    assert list(listed.unknown_state_filters) == ["Bogus"]
    described = await client.request(ApiKey.DESCRIBE_TRANSACTIONS, 0, {"transactional_ids": [TXN, "missing"]})
    ours, missing = described.transaction_states
    assert (ours.transaction_state, ours.producer_id, [t.topic for t in ours.topics]) == ("Ongoing", pid, ["adm"])
    assert missing.error_code == ErrorCode.TRANSACTIONAL_ID_NOT_FOUND
    producers = await client.request(
        ApiKey.DESCRIBE_PRODUCERS, 0, {"topics": [{"name": "adm", "partition_indexes": [0]}]}
    )
    [active] = producers.topics[0].partitions[0].active_producers
    assert (active.producer_id, active.current_txn_start_offset) == (pid, 0)


async def test_hanging_transaction_is_cleared_by_an_abort_marker(broker, client) -> None:
    """A transaction the coordinator does not know (e.g. from an old bug) holds the LSO until an admin writes an
    abort marker with WriteTxnMarkers, as Kafka's `kafka-transactions.sh abort` does."""
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("hang"))
    hanging = batch([b"stuck"], producer_id=777, producer_epoch=3, base_sequence=0, transactional=True)
    assert broker.node.replicas.append("hang", 0, hanging, now_ms()).error == ErrorCode.NONE
    with trio.fail_after(5):
        while (await _fetch(client, "hang", 0, 0)).high_watermark < 1:
            await trio.sleep(0.02)
    assert (await _fetch(client, "hang", 0, READ_COMMITTED)).last_stable_offset == 0
    body = {
        "markers": [
            {
                "producer_id": 777,
                "producer_epoch": 3,
                "transaction_result": False,
                "topics": [{"name": "hang", "partition_indexes": [0]}],
                "coordinator_epoch": 0,
            }
        ]
    }
    response = await client.request(ApiKey.WRITE_TXN_MARKERS, 1, body)
    assert response.markers[0].topics[0].partitions[0].error_code == ErrorCode.NONE
    read = await _fetch(client, "hang", 0, READ_COMMITTED)
    assert read.last_stable_offset == 2 and [a.producer_id for a in read.aborted_transactions] == [777]


async def test_write_txn_markers_with_many_markers_answers_each_in_order(broker, client) -> None:
    """A marker channel batches the markers of several transactions into one WriteTxnMarkers: each is appended and
    answered, in the request's order, and every partition's LSO moves past all of them."""
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("many", partitions=2))
    for producer_id in (801, 802, 803):
        for partition in (0, 1):
            data = batch([b"v"], producer_id=producer_id, producer_epoch=0, base_sequence=0, transactional=True)
            assert broker.node.replicas.append("many", partition, data, now_ms()).error == ErrorCode.NONE
    markers = [
        {
            "producer_id": producer_id,
            "producer_epoch": 0,
            "transaction_result": producer_id != 802,
            "topics": [{"name": "many", "partition_indexes": [0, 1]}],
            "coordinator_epoch": 0,
        }
        for producer_id in (803, 801, 802)
    ]
    response = await client.request(ApiKey.WRITE_TXN_MARKERS, 1, {"markers": markers})
    assert [m.producer_id for m in response.markers] == [803, 801, 802]
    assert all(p.error_code == ErrorCode.NONE for m in response.markers for t in m.topics for p in t.partitions)
    for partition in (0, 1):
        read = await _fetch(client, "many", partition, READ_COMMITTED)
        assert read.last_stable_offset == 6
        assert [a.producer_id for a in read.aborted_transactions] == [802]
