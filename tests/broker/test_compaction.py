"""Compaction in a running broker: a compacted topic keeps each key's latest record through passes and restarts,
and ``__transaction_state`` compacted under the coordinator loads back the same transactional ids."""

from __future__ import annotations

import trio
from oncelog.broker.metadata import CONSUMER_OFFSETS_TOPIC, INTERNAL_TOPIC_CONFIGS, TRANSACTION_STATE_TOPIC
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import SimpleRecord, encode_batch, iter_records

from broker.group.test_group_txn import TXN, _add_offsets, _txn_commit
from broker.group.test_groups import _topic, fetch_offsets
from broker.helpers import create_topic_body, fetch_body, produce_body
from broker.txn.test_transactions import _add, _end, _init_ok

FAST_CLEANER = {"log_cleaner_backoff_ms": "20"}


async def _read_all(client, topic: str) -> list[tuple[int, bytes, bytes]]:
    out: list[tuple[int, bytes, bytes]] = []
    offset = 0
    while True:
        body = fetch_body(topic, 0, offset, max_bytes=1 << 20, partition_max_bytes=1 << 20)
        partition = (await client.request(ApiKey.FETCH, 11, body)).responses[0].partitions[0]
        assert partition.error_code == ErrorCode.NONE
        records = [(r.offset, r.key, r.value) for _, r in iter_records(partition.records or b"") if r.offset >= offset]
        if not records:
            return out
        out += records
        offset = records[-1][0] + 1


async def _wait_compacted(broker, topic: str, partition: int, most_segments: int) -> None:
    with trio.fail_after(10):
        while len(broker.node.logs.get(topic, partition).segments) > most_segments:
            await trio.sleep(0.02)


async def test_a_compacted_topic_keeps_each_keys_latest_value(start_broker, tmp_path) -> None:
    data = tmp_path / "compact-data"
    broker = await start_broker(data, **FAST_CLEANER)
    client = await broker.connect()
    configs = {"cleanup.policy": "compact", "segment.bytes": "1024"}
    created = await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("table", configs=configs))
    assert created.topics[0].error_code == ErrorCode.NONE
    # Kafka answers INVALID_RECORD at every version; from v8 the answer names the keyless record.
    keyless = encode_batch([SimpleRecord(b"k", b"keyed"), SimpleRecord(None, b"no key")])
    refused = (await client.request(ApiKey.PRODUCE, 7, produce_body("table", 0, keyless))).responses[0]
    assert refused.partition_responses[0].error_code == ErrorCode.INVALID_RECORD
    refused = (await client.request(ApiKey.PRODUCE, 8, produce_body("table", 0, keyless))).responses[0]
    assert refused.partition_responses[0].error_code == ErrorCode.INVALID_RECORD
    assert [e.batch_index for e in refused.partition_responses[0].record_errors] == [1]
    assert "without key" in refused.partition_responses[0].error_message
    # Kafka's LogValidator message and ReplicaManager.processFailedRecord's log start offset (not -1).
    assert refused.partition_responses[0].error_message.startswith(
        "One or more records have been rejected due to 1 record errors in total, and only showing the first three "
        "errors at most: [RecordError(batchIndex=1, message='Compacted topic cannot accept message without key"
    )
    assert (refused.partition_responses[0].base_offset, refused.partition_responses[0].log_start_offset) == (-1, 0)
    written = []
    for i in range(300):
        key, value = b"key-%d" % (i % 7), b"value-%d" % i
        records = encode_batch([SimpleRecord(key, value)])
        response = await client.request(ApiKey.PRODUCE, 7, produce_body("table", 0, records))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        written.append((response.responses[0].partition_responses[0].base_offset, key, value))
    # 300 records of ~80 bytes filled ~24 segments of 1 KiB; passes keep merging the closed ones as they shrink.
    active_base = broker.node.logs.get("table", 0).active_segment.base_offset
    last_closed = {key: offset for offset, key, _ in written if offset < active_base}
    want = [r for r in written if r[0] >= active_base or last_closed[r[1]] == r[0]]
    with trio.fail_after(10):
        while (read := await _read_all(client, "table")) != want:
            await trio.sleep(0.02)
    await _wait_compacted(broker, "table", 0, most_segments=4)
    await broker.stop()

    broker = await start_broker(data, **FAST_CLEANER)
    client = await broker.connect()
    assert await _read_all(client, "table") == read


async def test_transaction_state_compacted_loads_the_same_ids(start_broker, tmp_path, monkeypatch) -> None:
    monkeypatch.setitem(INTERNAL_TOPIC_CONFIGS[TRANSACTION_STATE_TOPIC], "segment.bytes", "2048")
    data = tmp_path / "txn-compact-data"
    settings = {**FAST_CLEANER, "transaction_state_log_num_partitions": "1"}
    broker = await start_broker(data, **settings)
    client = await broker.connect()
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("orders"))
    ids = {}
    for txn in ("writer-a", "writer-b", "writer-c"):
        ids[txn] = await _init_ok(client, txn)
    for _round in range(25):
        for txn, (pid, epoch) in ids.items():
            assert await _add(client, pid, epoch, [("orders", 0)], txn=txn) == {("orders", 0): ErrorCode.NONE}
            # EndTxn v5 bumps the epoch each time, so only each id's latest state record holds its epoch.
            body = {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch, "committed": False}
            ended = await client.request(ApiKey.END_TXN, 5, body)
            assert (ended.error_code, ended.producer_id) == (ErrorCode.NONE, pid)
            ids[txn] = (pid, ended.producer_epoch)
    # 150 state records of ~100 bytes filled ~8 segments of 2 KiB.
    assert broker.node.logs.get(TRANSACTION_STATE_TOPIC, 0).log_end_offset >= 150
    await _wait_compacted(broker, TRANSACTION_STATE_TOPIC, 0, most_segments=3)
    await broker.stop()

    broker = await start_broker(data, **settings)
    client = await broker.connect()
    for txn, (pid, epoch) in ids.items():
        assert await _init_ok(client, txn) == (pid, epoch + 1)  # each id's latest state survived compaction


async def test_a_compaction_process_killed_inside_a_swap_is_finished_by_the_broker(
    start_broker, tmp_path, monkeypatch
) -> None:
    # The compaction child reads this at its start and SIGKILLs itself once its first swap file is durable; this
    # process read its faults at import, so the broker itself is unaffected.
    monkeypatch.setenv("ONCELOG_FAULTS", "cleaner.after_swap_rename")
    data = tmp_path / "killed-pass-data"
    broker = await start_broker(data, log_cleaner_backoff_ms="3600000")  # the test runs the one pass itself
    client = await broker.connect()
    configs = {"cleanup.policy": "compact", "segment.bytes": "1024"}
    await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body("table", configs=configs))
    latest = {}
    for i in range(300):
        key, value = b"key-%d" % (i % 7), b"value-%d" % i
        records = encode_batch([SimpleRecord(key, value)])
        response = await client.request(ApiKey.PRODUCE, 7, produce_body("table", 0, records))
        assert response.responses[0].partition_responses[0].error_code == ErrorCode.NONE
        latest[key] = (response.responses[0].partition_responses[0].base_offset, value)
    partition_log = broker.node.logs.get("table", 0)
    before = len(partition_log.segments)

    await broker.node.compactor.compact_all()

    assert len(partition_log.segments) < before  # the killed pass's first group is installed
    assert not list(partition_log.directory.glob("*.swap"))
    suffixes = (".log", ".index", ".timeindex")
    on_disk = {p.name for p in partition_log.directory.iterdir() if p.suffix in suffixes}
    assert on_disk == {f"{s.base_offset:020d}{suffix}" for s in partition_log.segments for suffix in suffixes}
    read = await _read_all(client, "table")
    assert len(read) < 300
    assert {key: (offset, value) for offset, key, value in read} == latest  # every key's latest record is there
    await broker.stop()

    monkeypatch.delenv("ONCELOG_FAULTS")
    broker = await start_broker(data, log_cleaner_backoff_ms="3600000")
    client = await broker.connect()
    assert await _read_all(client, "table") == read


async def test_transactional_offset_commits_are_compacted_and_load_back(start_broker, tmp_path, monkeypatch) -> None:
    """EOS commits its offsets with TxnOffsetCommit: transactional batches and markers in __consumer_offsets. They
    are compacted like any others (aborted ones dropped, markers once their data is gone, segments merged), and
    the group's latest committed offset loads back."""
    monkeypatch.setitem(INTERNAL_TOPIC_CONFIGS[CONSUMER_OFFSETS_TOPIC], "segment.bytes", "2048")
    data = tmp_path / "txn-offsets-data"
    settings = {**FAST_CLEANER, "offsets_topic_num_partitions": "1", "log_cleaner_delete_retention_ms": "0"}
    broker = await start_broker(data, **settings)
    client = await broker.connect()
    topic = await _topic(client)
    pid, epoch = await _init_ok(client, TXN)
    committed = -1

    def older_half_batches() -> int:
        """Batches left in the older half of the log (passes lag a few segments behind the writes)."""
        half = offsets_log().log_end_offset // 2
        return sum(1 for s in offsets_log().segments for _, h in s.iter_headers(0) if h.base_offset < half)

    def offsets_log():
        return broker.node.logs.get(CONSUMER_OFFSETS_TOPIC, 0)

    for i in range(400):  # ~170 bytes per transaction (offset record and marker): a segment every ~12
        assert await _add_offsets(client, pid, epoch) == ErrorCode.NONE
        assert await _txn_commit(client, pid, epoch, {(topic, 0): i}) == {(topic, 0): ErrorCode.NONE}
        commit = i % 5 != 4
        assert await _end(client, pid, epoch, commit, TXN) == ErrorCode.NONE
        committed = i if commit else committed
        if i >= 100 and older_half_batches() == 0 and len(offsets_log().segments) <= 8:
            break
        await trio.sleep(0.005)  # passes run every 20 ms
    # Without compaction the older half alone would hold 100+ batches in 8+ segments.
    assert i >= 100 and older_half_batches() == 0 and len(offsets_log().segments) <= 8
    assert offsets_log().log_end_offset == 2 * (i + 1)
    assert (await fetch_offsets(client, [(topic, 0)], require_stable=True))[(topic, 0)] == (committed, "m", 0)
    await broker.stop()

    broker = await start_broker(data, **settings)
    client = await broker.connect()
    assert (await fetch_offsets(client, [(topic, 0)], require_stable=True))[(topic, 0)] == (committed, "m", 0)
    assert await _init_ok(client, TXN) == (pid, epoch + 1)  # no transaction was left looking open
