"""Differential tests (issue 30 item 3): the same scenario against Apache Kafka (``support.kafka_peer``) and against
oncelog, comparing what clients observe.

One Kafka (the test run's shared ``kafka_peer``, ``tests/conftest.py``) and one oncelog broker serve the whole module.
Each scenario is a function of one broker's bootstrap that returns its observable: error codes (through raw requests
encoded with oncelog's own codecs where a client hides them), offsets, timestamps, records seen by a stock client, group
states. Only what legitimately differs between two brokers is normalized: topic names (each run makes its own), producer
and member ids (replaced by their order of appearance), error messages where only the code is Kafka's contract. Every
test asserts oncelog's observable equals Kafka's; a difference that is kept on purpose is listed in COMPATIBILITY.md
("Differences from Apache Kafka") and its test asserts the documented oncelog value beside Kafka's.
"""

from __future__ import annotations

import itertools
import re
import struct
import time
from collections.abc import Callable
from typing import Any

import pytest
from broker.helpers import create_topic_body, fetch_body, list_offsets_body, produce_body
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.consumer_protocol import encode_subscription
from oncelog.protocol.records import SimpleRecord, encode_batch, iter_batches
from support.hostile import Wire
from support.kafka_peer import KafkaPeer

TIMEOUT = 15.0
METADATA_V = 9
CREATE_TOPICS_V = 5
PRODUCE_V = 8  # record_errors (KIP-467)
FETCH_V = 11
LIST_OFFSETS_V = 7
FIND_COORDINATOR_V = 3
INIT_PRODUCER_ID_V = 3
ADD_PARTITIONS_V = 3
END_TXN_V = 3
INCREMENTAL_ALTER_CONFIGS_V = 1
#: Answers a request is retried on while a coordinator or a new topic settles.
SETTLING = {
    ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.NOT_COORDINATOR,
    ErrorCode.CONCURRENT_TRANSACTIONS,
    ErrorCode.LEADER_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER,
}
_names = itertools.count()


@pytest.fixture(scope="module")
def brokers(kafka_peer: KafkaPeer, bootstrap: str) -> dict[str, str]:
    """Apache Kafka (the run's shared peer, with the oncelog test brokers' group settings) and the module's oncelog
    broker."""
    return {"kafka": kafka_peer.bootstrap, "oncelog": bootstrap}


def run_both(brokers: dict[str, str], scenario: Callable[[str], Any]) -> tuple[Any, Any]:
    """``scenario`` against Kafka, then against oncelog: (Kafka's observable, oncelog's)."""
    return scenario(brokers["kafka"]), scenario(brokers["oncelog"])


def name(prefix: str) -> str:
    return f"diff-{prefix}-{next(_names)}"


def wire(bootstrap: str) -> Wire:
    return Wire(int(bootstrap.rpartition(":")[2]), timeout=TIMEOUT)


def retry_while(call: Callable[[], Any], pending: Callable[[Any], bool]) -> Any:
    """``call()`` again while ``pending(answer)``, for at most ``TIMEOUT`` seconds; the last answer."""
    end = time.monotonic() + TIMEOUT
    while True:
        answer = call()
        if not pending(answer) or time.monotonic() > end:
            return answer
        time.sleep(0.1)


def settle(call: Callable[[], Any], code_of: Callable[[Any], int]) -> Any:
    """``call()`` again while its answer's code is a settling one (coordinator loading, topic not led yet)."""
    return retry_while(call, lambda answer: code_of(answer) in SETTLING)


def topic_spec(topic: str, partitions: int = 1, replication: int = 1, configs: dict[str, str] | None = None) -> dict:
    """One topic of a CreateTopics request."""
    return create_topic_body(topic, partitions, replication, configs)["topics"][0]


def create_topics(w: Wire, specs: list[dict]) -> list[tuple[int, str | None]]:
    """CreateTopics v5 of ``specs`` -> each topic's (error code, error message), in order."""
    answer = w.request(ApiKey.CREATE_TOPICS, CREATE_TOPICS_V, {"topics": specs, "timeout_ms": 10000})
    codes = {t.name: (t.error_code, t.error_message) for t in answer.topics}
    return [codes[s["name"]] for s in specs]


def make_topic(w: Wire, topic: str, partitions: int = 1, configs: dict[str, str] | None = None) -> str:
    """Create ``topic`` and wait until Metadata shows every partition led."""
    assert create_topics(w, [topic_spec(topic, partitions, configs=configs)])[0][0] == 0
    end = time.monotonic() + TIMEOUT
    while time.monotonic() < end:
        md = w.request(
            ApiKey.METADATA,
            METADATA_V,
            {"topics": [{"name": topic}], "allow_auto_topic_creation": False},
        )
        parts = md.topics[0].partitions if md.topics and md.topics[0].error_code == 0 else []
        led = len(parts) == partitions and all(p.error_code == 0 and p.leader_id >= 0 for p in parts)
        # Kafka's Metadata can name a leader a moment before the partition serves requests.
        if led and all(list_offset(w, topic, p, -1)[0] == 0 for p in range(partitions)):
            return topic
        time.sleep(0.1)
    raise TimeoutError(f"{topic} not led")


def produce(
    w: Wire, topic: str, partition: int, records: bytes, *, transactional_id: str | None = None
) -> dict[str, Any]:
    """Produce v8 of one batch -> that partition's answer (error, base offset, record errors by index)."""
    body = {**produce_body(topic, partition, records), "transactional_id": transactional_id}
    part = w.request(ApiKey.PRODUCE, PRODUCE_V, body).responses[0].partition_responses[0]
    return {
        "error": part.error_code,
        "base_offset": part.base_offset,
        "record_errors": sorted((e.batch_index, e.batch_index_error_message) for e in part.record_errors),
        "message": part.error_message,
    }


def records(*values: bytes, keys: list[bytes | None] | None = None, **kwargs: Any) -> bytes:
    keys = keys if keys is not None else [b"k"] * len(values)
    return encode_batch([SimpleRecord(k, v) for k, v in zip(keys, values, strict=True)], **kwargs)


def fetch(w: Wire, topic: str, partition: int, offset: int, *, isolation_level: int = 0) -> Any:
    body = fetch_body(topic, partition, offset, min_bytes=0, max_bytes=1 << 20, isolation_level=isolation_level)
    return w.request(ApiKey.FETCH, FETCH_V, body).responses[0].partitions[0]


def list_offset(w: Wire, topic: str, partition: int, timestamp: int, *, isolation_level: int = 0) -> tuple:
    """ListOffsets v7 -> (error, offset, timestamp, leader epoch)."""
    body = list_offsets_body(topic, partition, timestamp, isolation_level)
    p = w.request(ApiKey.LIST_OFFSETS, LIST_OFFSETS_V, body).topics[0].partitions[0]
    return (p.error_code, p.offset, p.timestamp, p.leader_epoch)


# --- bad requests ----------------------------------------------------------------------------------------------

#: Kafka's messages oncelog answers differently on purpose (COMPATIBILITY.md, the notes on Kafka 4.1.1 side by side):
#: its ``segment.bytes`` floor is 14 bytes (Kafka 4: 1 MiB) so that tests can roll tiny segments, and its config
#: parser does not name Kafka's INT / LONG types.
DOCUMENTED_MESSAGES = {
    "Invalid value 10 for configuration segment.bytes: Value must be at least 1048576": (
        "Invalid value 10 for configuration segment.bytes: Value must be at least 14"
    ),
    "Invalid value abc for configuration retention.ms: Not a number of type LONG": (
        "Invalid value abc for configuration retention.ms: Not a number"
    ),
}


def documented(answers: list[tuple[int, str | None]]) -> list[tuple[int, str | None]]:
    """Kafka's answers with the messages oncelog documents as different replaced by oncelog's."""
    return [(code, DOCUMENTED_MESSAGES.get(message or "", message)) for code, message in answers]


def named(answer: tuple[int, str | None], topic: str) -> tuple[int, str | None]:
    """``answer`` with ``topic`` in its message replaced (each run names its own topics)."""
    code, message = answer
    return code, message.replace(topic, "<topic>") if message is not None else None


def test_create_topics_refusals(brokers: dict[str, str]) -> None:
    """CreateTopics' per-topic codes: invalid names (INVALID_TOPIC_EXCEPTION), a name colliding with an existing one
    through '.'/'_' and an existing name, bad partition counts and replication factors, invalid configs."""

    def scenario(bootstrap: str) -> list[tuple[int, str | None]]:
        with wire(bootstrap) as w:
            base = name("create")
            make_topic(w, f"{base}.x")
            specs = [
                topic_spec(".."),
                topic_spec("."),
                topic_spec("a" * 250),
                topic_spec(f"{base} bad!"),
                topic_spec(""),
                topic_spec(f"{base}_x"),  # collides with {base}.x
                topic_spec(f"{base}.x"),  # exists
                topic_spec(f"{base}-zero", partitions=0),
                topic_spec(f"{base}-negative", partitions=-2),
                topic_spec(f"{base}-rf", replication=2),
                topic_spec(f"{base}-rf0", replication=0),
                topic_spec(f"{base}-policy", configs={"cleanup.policy": "bogus"}),
                topic_spec(f"{base}-retention", configs={"retention.ms": "abc"}),
                topic_spec(f"{base}-unknown", configs={"no.such.config": "1"}),
                topic_spec(f"{base}-segment", configs={"segment.bytes": "10"}),
                topic_spec(f"{base}-isr", configs={"min.insync.replicas": "0"}),
            ]
            return [named(create_topics(w, [spec])[0], base) for spec in specs]

    kafka, oncelog = run_both(brokers, scenario)
    assert oncelog == documented(kafka)


def test_incremental_alter_configs_refusals(brokers: dict[str, str]) -> None:
    """IncrementalAlterConfigs on a topic: an invalid value, an unknown name, an unknown topic, a bad operation."""

    def scenario(bootstrap: str) -> list[tuple[int, str | None]]:
        with wire(bootstrap) as w:
            topic, missing = make_topic(w, name("alter")), name("missing")
            codes = []
            for resource, op, key, value in (
                (topic, 0, "cleanup.policy", "bogus"),
                (topic, 0, "retention.ms", "abc"),
                (topic, 0, "no.such.config", "1"),
                (topic, 2, "cleanup.policy", "compact"),  # APPEND to a list config: fine
                (topic, 2, "retention.ms", "1"),  # APPEND to a non-list config
                (topic, 0, "retention.ms", "1000"),
                (missing, 0, "retention.ms", "1000"),
            ):
                body = {
                    "resources": [
                        {
                            "resource_type": 2,
                            "resource_name": resource,
                            "configs": [{"name": key, "config_operation": op, "value": value}],
                        }
                    ],
                    "validate_only": False,
                }
                answer = w.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, INCREMENTAL_ALTER_CONFIGS_V, body)
                result = answer.responses[0]
                codes.append(named(named((result.error_code, result.error_message), topic), missing))
            return codes

    kafka, oncelog = run_both(brokers, scenario)
    assert oncelog == documented(kafka)


def test_unknown_topics_and_partitions(brokers: dict[str, str]) -> None:
    """Produce, Fetch and ListOffsets naming an unknown topic, and a partition past an existing topic's last."""

    def scenario(bootstrap: str) -> list[Any]:
        with wire(bootstrap) as w:
            topic = make_topic(w, name("known"), partitions=2)
            missing = name("missing")
            out = []
            for t, p in ((missing, 0), (topic, 2), (topic, -1)):
                out.append(produce(w, t, p, records(b"v"))["error"])
                part = fetch(w, t, p, 0)
                out.append((part.error_code, part.high_watermark, part.last_stable_offset, part.log_start_offset))
                out.append(list_offset(w, t, p, -1)[0])
            return out

    kafka, oncelog = run_both(brokers, scenario)
    assert oncelog == kafka


def test_fetch_offsets_out_of_range(brokers: dict[str, str]) -> None:
    """Fetch below the log start, at the high watermark and past it; ListOffsets of the same partition."""

    def scenario(bootstrap: str) -> list[tuple]:
        with wire(bootstrap) as w:
            topic = make_topic(w, name("range"))
            assert produce(w, topic, 0, records(b"a", b"b", b"c"))["error"] == 0
            out = []
            for offset in (-5, -1, 0, 2, 3, 4, 1000):
                part = fetch(w, topic, 0, offset)
                count = sum(len(recs) for _, recs in iter_batches(part.records or b""))
                out.append(
                    (
                        offset,
                        part.error_code,
                        part.high_watermark,
                        part.last_stable_offset,
                        part.log_start_offset,
                        count,
                    )
                )
            return out

    kafka, oncelog = run_both(brokers, scenario)
    assert oncelog == kafka


# --- producer epochs and transactions -------------------------------------------------------------------------


def find_coordinator(w: Wire, key: str, key_type: int) -> None:
    def call() -> Any:
        return w.request(ApiKey.FIND_COORDINATOR, FIND_COORDINATOR_V, {"key": key, "key_type": key_type})

    assert settle(call, lambda a: a.error_code).error_code == 0


def init_producer_id(w: Wire, txn: str | None, pid: int = -1, epoch: int = -1) -> tuple[int, int, int]:
    body = {
        "transactional_id": txn,
        "transaction_timeout_ms": 60000,
        "producer_id": pid,
        "producer_epoch": epoch,
    }
    answer = settle(lambda: w.request(ApiKey.INIT_PRODUCER_ID, INIT_PRODUCER_ID_V, body), lambda a: a.error_code)
    return answer.error_code, answer.producer_id, answer.producer_epoch


def add_partitions(w: Wire, txn: str, pid: int, epoch: int, topic: str, partition: int) -> int:
    body = {
        "v3_and_below_transactional_id": txn,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [partition]}],
    }
    answer = settle(
        lambda: w.request(ApiKey.ADD_PARTITIONS_TO_TXN, ADD_PARTITIONS_V, body),
        lambda a: a.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code,
    )
    return answer.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code


def end_txn(w: Wire, txn: str, pid: int, epoch: int, *, commit: bool) -> int:
    body = {"transactional_id": txn, "producer_id": pid, "producer_epoch": epoch, "committed": commit}
    return settle(lambda: w.request(ApiKey.END_TXN, END_TXN_V, body), lambda a: a.error_code).error_code


def txn_records(pid: int, epoch: int, seq: int, *values: bytes) -> bytes:
    return records(*values, producer_id=pid, producer_epoch=epoch, base_sequence=seq, transactional=True)


def test_transactions_misused(brokers: dict[str, str]) -> None:
    """EndTxn with nothing added, transactional produce to a partition not added, a fenced epoch on every
    transactional request, EndTxn in the wrong state; idempotent produce with a stale epoch."""

    def scenario(bootstrap: str) -> dict[str, Any]:
        with wire(bootstrap) as w:
            topic = make_topic(w, name("txn"), partitions=2)
            txn = name("txn-id")
            find_coordinator(w, txn, 1)
            out: dict[str, Any] = {}
            err, pid, e0 = init_producer_id(w, txn)
            out["init"] = err
            out["end_commit_nothing_added"] = end_txn(w, txn, pid, e0, commit=True)
            out["end_abort_nothing_added"] = end_txn(w, txn, pid, e0, commit=False)
            out["produce_not_added"] = produce(w, topic, 1, txn_records(pid, e0, 0, b"x"), transactional_id=txn)
            out["add"] = add_partitions(w, txn, pid, e0, topic, 0)
            out["produce_added"] = produce(w, topic, 0, txn_records(pid, e0, 0, b"a"), transactional_id=txn)
            out["produce_other_partition"] = produce(w, topic, 1, txn_records(pid, e0, 0, b"y"), transactional_id=txn)
            out["produce_future_epoch"] = produce(w, topic, 0, txn_records(pid, e0 + 5, 0, b"z"), transactional_id=txn)
            err, pid2, e1 = init_producer_id(w, txn)  # fences e0, aborting its open transaction
            out["reinit"] = (err, pid2 == pid, e1 - e0)
            out["add_fenced"] = add_partitions(w, txn, pid, e0, topic, 0)
            out["produce_fenced"] = produce(w, topic, 0, txn_records(pid, e0, 1, b"b"), transactional_id=txn)
            out["end_fenced"] = end_txn(w, txn, pid, e0, commit=True)
            out["add_wrong_pid"] = add_partitions(w, txn, pid + 1000, e1, topic, 0)
            out["end_commit_after_abort"] = end_txn(w, txn, pid, e1, commit=True)
            # A stale epoch in InitProducerId (KIP-360's producer_id/epoch fields).
            out["init_stale"] = init_producer_id(w, txn, pid, e0)[0]
            # Idempotent producer: a batch with an epoch below the one the partition has seen.
            err, ipid, ie = init_producer_id(w, None)
            idem = dict(producer_id=ipid, base_sequence=0)
            out["idempotent"] = [
                produce(w, topic, 1, records(b"i", producer_epoch=ie + 1, **idem))["error"],
                produce(w, topic, 1, records(b"j", producer_epoch=ie, **idem))["error"],
            ]
            return out

    kafka, oncelog = run_both(brokers, scenario)
    assert oncelog == kafka


# --- ListOffsets by timestamp, per-record produce errors ------------------------------------------------------


def test_list_offsets_by_timestamp(brokers: dict[str, str]) -> None:
    """Earliest, latest, max timestamp and by time over two batches whose timestamps are out of order."""
    stamps = [1, 1_000_000_000_000, 5, 999_999_999_999]

    def scenario(bootstrap: str) -> list[tuple]:
        with wire(bootstrap) as w:
            topic = make_topic(w, name("times"))
            batch = encode_batch([SimpleRecord(b"k", b"v", timestamp=t) for t in stamps])
            assert produce(w, topic, 0, batch)["error"] == 0
            late = encode_batch([SimpleRecord(b"k", b"w", timestamp=t) for t in (3, 7)])
            assert produce(w, topic, 0, late)["error"] == 0
            empty = make_topic(w, name("times-empty"))
            targets = (-2, -1, -3, 0, 1, 2, 4, 6, 7, 8, 999_999_999_999, 1_000_000_000_000, 1_000_000_000_001)
            out = [(t, *list_offset(w, topic, 0, t)) for t in targets]
            out += [("empty", t, *list_offset(w, empty, 0, t)) for t in (-2, -1, -3, 5)]
            return out

    kafka, oncelog = run_both(brokers, scenario)
    assert oncelog == kafka


def _without_names(answer: dict[str, Any], *topics: str) -> dict[str, Any]:
    """The answer with the topic names and the clock-bound timestamp ranges in its messages replaced."""

    def strip(text: str | None) -> str | None:
        if text is None:
            return None
        for topic in topics:
            text = text.replace(topic, "<topic>")
        return re.sub(r"within \[\d+, \d+\]", "within [<now - before>, <now + after>]", text)

    return {
        **answer,
        "message": strip(answer["message"]),
        "record_errors": [(index, strip(message)) for index, message in answer["record_errors"]],
    }


def test_per_record_produce_errors(brokers: dict[str, str]) -> None:
    """Keyless records on a compacted topic and timestamps out of a topic's bounds: the batch is refused with
    INVALID_RECORD / INVALID_TIMESTAMP and ``record_errors`` names the offending records by index."""

    def scenario(bootstrap: str) -> list[dict]:
        with wire(bootstrap) as w:
            compacted = make_topic(w, name("compact"), configs={"cleanup.policy": "compact"})
            bounded = make_topic(w, name("bounded"), configs={"message.timestamp.before.max.ms": "60000"})
            now = int(time.time() * 1000)
            answers = [
                produce(w, compacted, 0, records(b"a", b"b", b"c", b"d", keys=[b"1", None, b"3", None])),
                produce(w, compacted, 0, records(b"a", keys=[None])),
                produce(w, compacted, 0, records(b"a", b"b", keys=[b"1", b"2"])),
                produce(w, bounded, 0, encode_batch([SimpleRecord(b"k", b"v", timestamp=t) for t in (now, 1, now, 2)])),
                produce(w, bounded, 0, encode_batch([SimpleRecord(b"k", b"v", timestamp=now)])),
            ]
            return [_without_names(answer, compacted, bounded) for answer in answers]

    kafka, oncelog = run_both(brokers, scenario)
    assert oncelog == kafka


# --- LSO and aborted ranges -----------------------------------------------------------------------------------


def _aborted(part: Any, pids: dict[int, int]) -> list[tuple[int, int]] | None:
    if part.aborted_transactions is None:
        return None
    return [(pids.setdefault(a.producer_id, len(pids)), a.first_offset) for a in part.aborted_transactions]


def _batches(part: Any, pids: dict[int, int], epochs: dict[int, int]) -> list[tuple]:
    """Each fetched batch as (base offset, records, transactional, control, producer index, epoch - first epoch)."""
    out = []
    for header, recs in iter_batches(part.records or b""):
        producer = pids.setdefault(header.producer_id, len(pids)) if header.producer_id >= 0 else -1
        epoch = header.producer_epoch - epochs.setdefault(header.producer_id, header.producer_epoch)
        out.append(
            (
                header.base_offset,
                len(recs),
                bool(header.attributes & 0x10),
                bool(header.attributes & 0x20),
                producer,
                epoch,
            )
        )
    return out


def stable(bootstrap: str, topic: str) -> bool:
    """Wait until the partition's last stable offset reaches its high watermark; return whether it had at the first
    look. Kafka answers EndTxn once the outcome is in its transaction log and writes the markers after, so a write
    racing them can land before them there; oncelog answers once the markers are written (COMPATIBILITY.md)."""
    end = time.monotonic() + TIMEOUT
    with wire(bootstrap) as w:
        first = True
        while list_offset(w, topic, 0, -1, isolation_level=1) != list_offset(w, topic, 0, -1):
            assert time.monotonic() < end, "markers not written"
            first = False
            time.sleep(0.05)
    return first


def test_lso_and_aborted_ranges(brokers: dict[str, str]) -> None:
    """Plain writes, committed and aborted transactions, one left open: Fetch's high watermark, last stable offset,
    aborted ranges and batches (read_committed and read_uncommitted), ListOffsets latest under both isolation levels;
    after the open one aborts, what a read_committed confluent-kafka consumer reads."""

    def scenario(bootstrap: str) -> tuple[dict[str, Any], list[bool]]:
        topic = name("lso")
        settled_at_once = []
        with wire(bootstrap) as w:
            make_topic(w, topic)
        plain = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        txp = Producer({"bootstrap.servers": bootstrap, "transactional.id": name("lso-txn"), "linger.ms": 0})
        txp.init_transactions(TIMEOUT)
        plain.produce(topic, b"plain-0", partition=0)
        plain.flush(TIMEOUT)
        for label, count, commit in (("c1", 3, True), ("a1", 2, False), ("c2", 1, True), ("a2", 2, False)):
            txp.begin_transaction()
            for i in range(count):
                txp.produce(topic, f"{label}-{i}".encode(), partition=0)
            txp.flush(TIMEOUT)
            if commit:
                txp.commit_transaction(TIMEOUT)
            else:
                txp.abort_transaction(TIMEOUT)
            settled_at_once.append(stable(bootstrap, topic))
        plain.produce(topic, b"plain-1", partition=0)
        plain.flush(TIMEOUT)
        txp.begin_transaction()
        txp.produce(topic, b"open-0", partition=0)
        txp.produce(topic, b"open-1", partition=0)
        txp.flush(TIMEOUT)
        plain.produce(topic, b"plain-2", partition=0)
        plain.flush(TIMEOUT)
        out: dict[str, Any] = {}
        pids: dict[int, int] = {}
        epochs: dict[int, int] = {}

        def observe(label: str) -> None:
            with wire(bootstrap) as w:
                for isolation in (0, 1):
                    for offset in (0, 5):
                        part = fetch(w, topic, 0, offset, isolation_level=isolation)
                        out[f"{label} fetch iso={isolation} from={offset}"] = (
                            part.error_code,
                            part.high_watermark,
                            part.last_stable_offset,
                            part.log_start_offset,
                            _aborted(part, pids),
                            _batches(part, pids, epochs),
                        )
                    out[f"{label} latest iso={isolation}"] = list_offset(w, topic, 0, -1, isolation_level=isolation)

        observe("open")
        txp.abort_transaction(TIMEOUT)
        settled_at_once.append(stable(bootstrap, topic))
        observe("closed")
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": name("lso-group"),
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.assign([TopicPartition(topic, 0, 0)])
            seen: list[tuple[int, bytes]] = []
            end = time.monotonic() + TIMEOUT
            quiet_until = None
            while time.monotonic() < end and (quiet_until is None or time.monotonic() < quiet_until):
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is None:
                    seen.append((msg.offset(), msg.value()))
                    if len(seen) >= 7:
                        quiet_until = time.monotonic() + 1.0
            out["read_committed"] = seen
        finally:
            consumer.close()
        return out, settled_at_once

    (kafka, _racing), (oncelog, settled_at_once) = run_both(brokers, scenario)
    assert oncelog == kafka
    # The documented difference: oncelog's markers are in the log when EndTxn is answered (Kafka's may follow).
    assert settled_at_once == [True] * 5


# --- consumer groups ------------------------------------------------------------------------------------------


def _describe(admin: AdminClient, group: str) -> tuple:
    desc = admin.describe_consumer_groups([group])[group].result(timeout=TIMEOUT)
    members = sorted(sorted(tp.partition for tp in m.assignment.topic_partitions) for m in desc.members)
    return (desc.state.name, desc.type.name, desc.partition_assignor, desc.is_simple_consumer_group, members)


def _poll_until(consumers: list[Consumer], done: Callable[[], bool]) -> None:
    end = time.monotonic() + TIMEOUT
    while not done():
        assert time.monotonic() < end, "group did not settle"
        for c in consumers:
            c.poll(0.05)


def test_consumer_group_rebalance_and_offsets(brokers: dict[str, str]) -> None:
    """Two classic members share four partitions (range), commit offsets, one leaves and the other takes all; the
    group described at each step, committed offsets read back by the member and by the admin client."""

    def scenario(bootstrap: str) -> list[Any]:
        topic = name("group")
        with wire(bootstrap) as w:
            make_topic(w, topic, partitions=4)
            for p in range(4):
                assert produce(w, topic, p, records(b"a", b"b", b"c"))["error"] == 0
        group = name("group-id")
        admin = AdminClient({"bootstrap.servers": bootstrap})
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "classic",
            "partition.assignment.strategy": "range",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 200,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        out: list[Any] = []
        first, second = Consumer(conf), Consumer(conf)
        try:
            first.subscribe([topic])
            _poll_until([first], lambda: len(first.assignment()) == 4)
            out.append(_describe(admin, group))
            second.subscribe([topic])
            _poll_until([first, second], lambda: len(first.assignment()) == 2 and len(second.assignment()) == 2)
            out.append(_describe(admin, group))
            for member in (first, second):
                member.commit(
                    offsets=[TopicPartition(topic, tp.partition, tp.partition + 1) for tp in member.assignment()],
                    asynchronous=False,
                )
            second.close()
            _poll_until([first], lambda: len(first.assignment()) == 4)
            out.append(_describe(admin, group))
            committed = first.committed([TopicPartition(topic, p) for p in range(4)], timeout=TIMEOUT)
            out.append([(tp.partition, tp.offset, tp.error) for tp in committed])
        finally:
            first.close()
            second.close()
        out.append(_describe(admin, group))
        from confluent_kafka import ConsumerGroupTopicPartitions

        listed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(TIMEOUT)
        out.append(sorted((tp.partition, tp.offset) for tp in listed.topic_partitions))
        return out

    kafka, oncelog = run_both(brokers, scenario)
    assert oncelog == kafka


JOIN_GROUP_V = 5
SYNC_GROUP_V = 3
HEARTBEAT_V = 3
LEAVE_GROUP_V = 3
OFFSET_COMMIT_V = 7
DESCRIBE_GROUPS_V = 4
DELETE_GROUPS_V = 1


def _assignment(topic: str) -> bytes:
    """A ConsumerProtocolAssignment v0 giving partition 0 of ``topic``."""
    raw = topic.encode()
    return struct.pack(">hih", 0, 1, len(raw)) + raw + struct.pack(">iii", 1, 0, -1)


def test_classic_group_errors(brokers: dict[str, str]) -> None:
    """A classic group driven by raw requests: JoinGroup's session bounds, MEMBER_ID_REQUIRED and a mismatched
    protocol type; SyncGroup, Heartbeat and OffsetCommit with a wrong generation or member and unknown partitions;
    LeaveGroup of an unknown member; DescribeGroups and DeleteGroups of live, simple and unknown groups."""

    def scenario(bootstrap: str) -> dict[str, Any]:
        with wire(bootstrap) as w:
            topic = make_topic(w, name("groups"), partitions=2)
            group, simple, unknown = name("grp"), name("grp-simple"), name("grp-unknown")
            find_coordinator(w, group, 0)
            find_coordinator(w, simple, 0)
            out: dict[str, Any] = {}

            def join(member: str, session_ms: int = 10000, protocol_type: str = "consumer") -> Any:
                body = {
                    "group_id": group,
                    "session_timeout_ms": session_ms,
                    "rebalance_timeout_ms": 10000,
                    "member_id": member,
                    "group_instance_id": None,
                    "protocol_type": protocol_type,
                    "protocols": [{"name": "range", "metadata": encode_subscription([topic])}],
                }
                return settle(lambda: w.request(ApiKey.JOIN_GROUP, JOIN_GROUP_V, body), lambda a: a.error_code)

            def sync(generation: int, member: str) -> int:
                body = {
                    "group_id": group,
                    "generation_id": generation,
                    "member_id": member,
                    "group_instance_id": None,
                    "assignments": [{"member_id": member, "assignment": _assignment(topic)}],
                }
                return w.request(ApiKey.SYNC_GROUP, SYNC_GROUP_V, body).error_code

            def heartbeat(group_id: str, generation: int, member: str) -> int:
                body = {
                    "group_id": group_id,
                    "generation_id": generation,
                    "member_id": member,
                    "group_instance_id": None,
                }
                return w.request(ApiKey.HEARTBEAT, HEARTBEAT_V, body).error_code

            def commit(group_id: str, generation: int, member: str, partitions: dict[str, int]) -> list[int]:
                body = {
                    "group_id": group_id,
                    "generation_id_or_member_epoch": generation,
                    "member_id": member,
                    "group_instance_id": None,
                    "topics": [
                        {
                            "name": t,
                            "partitions": [
                                {
                                    "partition_index": p,
                                    "committed_offset": 1,
                                    "committed_leader_epoch": -1,
                                    "committed_metadata": "",
                                }
                            ],
                        }
                        for t, p in partitions.items()
                    ],
                }
                answer = w.request(ApiKey.OFFSET_COMMIT, OFFSET_COMMIT_V, body)
                return [p.error_code for t in answer.topics for p in t.partitions]

            def describe(*groups: str) -> list[tuple]:
                answer = w.request(
                    ApiKey.DESCRIBE_GROUPS,
                    DESCRIBE_GROUPS_V,
                    {"groups": list(groups), "include_authorized_operations": False},
                )
                return [
                    (g.error_code, g.group_state, g.protocol_type, g.protocol_data, len(g.members))
                    for g in answer.groups
                ]

            out["join_session_small"] = join("", session_ms=10).error_code
            out["join_session_large"] = join("", session_ms=3_600_000).error_code
            first = join("")
            member = first.member_id
            out["join_no_member_id"] = (first.error_code, bool(member))
            joined = join(member)
            generation = joined.generation_id
            out["join"] = (
                joined.error_code,
                generation,
                joined.leader == member,
                joined.protocol_name,
                len(joined.members),
            )
            out["join_other_type"] = join("", protocol_type="other").error_code
            # Kafka's DescribeGroups reads the coordinator's last committed state, which may not hold the group
            # for a moment after its first JoinGroup (Dead meanwhile); oncelog shows it at once.
            out["describe_completing"] = retry_while(lambda: describe(group), lambda d: d[0][1] == "Dead")
            out["heartbeat_before_sync"] = heartbeat(group, generation, member)
            out["sync_wrong_generation"] = sync(generation + 1, member)
            out["sync_unknown_member"] = sync(generation, "nobody")
            out["sync"] = sync(generation, member)
            out["describe_stable"] = describe(group)
            out["heartbeat"] = [
                heartbeat(group, generation, member),
                heartbeat(group, generation + 1, member),
                heartbeat(group, generation, "nobody"),
                heartbeat(unknown, 1, "nobody"),
            ]
            out["commit"] = [
                commit(group, generation, member, {topic: 0}),
                commit(group, generation + 1, member, {topic: 0}),
                commit(group, generation, "nobody", {topic: 0}),
                commit(group, generation, member, {topic: 5}),
                commit(group, generation, member, {name("missing"): 0}),
                commit(simple, -1, "", {topic: 1}),
                commit(simple, 3, "someone", {topic: 1}),
            ]
            out["describe_others"] = describe(simple, unknown)
            body = {"group_id": group, "members": [{"member_id": "nobody", "group_instance_id": None}]}
            answer = w.request(ApiKey.LEAVE_GROUP, LEAVE_GROUP_V, body)
            out["leave_unknown"] = (answer.error_code, [m.error_code for m in answer.members])
            answer = w.request(ApiKey.DELETE_GROUPS, DELETE_GROUPS_V, {"groups_names": [group, simple, unknown]})
            roles = {group: "live", simple: "simple", unknown: "unknown"}
            out["delete"] = sorted((roles[r.group_id], r.error_code) for r in answer.results)  # any order
            body = {"group_id": group, "members": [{"member_id": member, "group_instance_id": None}]}
            answer = w.request(ApiKey.LEAVE_GROUP, LEAVE_GROUP_V, body)
            out["leave"] = (answer.error_code, [m.error_code for m in answer.members])
            out["describe_left"] = retry_while(lambda: describe(group), lambda d: d[0][1] != "Empty")
            answer = w.request(ApiKey.DELETE_GROUPS, DELETE_GROUPS_V, {"groups_names": [group]})
            out["delete_empty"] = [r.error_code for r in answer.results]
            out["describe_deleted"] = describe(group, simple)
            return out

    kafka, oncelog = run_both(brokers, scenario)
    assert oncelog == kafka


def _failure(call: Callable[[], Any]) -> tuple:
    """The KafkaError ``call`` raises, as (name, fatal, retriable, txn_requires_abort); None when it succeeds."""
    try:
        call()
    except KafkaException as exc:
        error = exc.args[0]
        return (error.name(), error.fatal(), error.retriable(), error.txn_requires_abort())
    return ()


def test_confluent_kafka_sees_the_same_errors(brokers: dict[str, str]) -> None:
    """What confluent-kafka's applications see: AdminClient create_topics failures with the broker's messages,
    list_offsets of an unknown partition, a consumer past the log end with ``auto.offset.reset=error``, and a
    transactional producer fenced by a second one with its transactional id."""

    def scenario(bootstrap: str) -> dict[str, Any]:
        topic = name("ck")
        with wire(bootstrap) as w:
            make_topic(w, topic)
            assert produce(w, topic, 0, records(b"a", b"b", b"c"))["error"] == 0
        out: dict[str, Any] = {}
        admin = AdminClient({"bootstrap.servers": bootstrap})
        bad = [NewTopic("..", 1, 1), NewTopic(f"{topic}-p", 1, 1, config={"cleanup.policy": "bogus"})]
        futures = admin.create_topics(bad, operation_timeout=10)
        out["create"] = []
        for new in bad:
            error = futures[new.topic].exception(timeout=TIMEOUT).args[0]
            out["create"].append((error.name(), error.str().replace(topic, "<topic>")))
        unknown = TopicPartition(topic, 5)
        future = admin.list_offsets({unknown: OffsetSpec.latest()})[unknown]
        out["list_offsets_unknown"] = _failure(lambda: future.result(timeout=TIMEOUT))
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": name("ck-group"), "auto.offset.reset": "error"}
        )
        try:
            consumer.assign([TopicPartition(topic, 0, 100)])
            end = time.monotonic() + TIMEOUT
            while time.monotonic() < end:
                msg = consumer.poll(0.2)
                if msg is not None and msg.error() is not None:
                    out["fetch_past_end"] = msg.error().name()
                    break
        finally:
            consumer.close()
        txn = name("ck-txn")
        first = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn})
        first.init_transactions(TIMEOUT)
        first.begin_transaction()
        first.produce(topic, b"fenced", partition=0)
        first.flush(TIMEOUT)
        second = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn})
        second.init_transactions(TIMEOUT)
        out["commit_fenced"] = _failure(lambda: first.commit_transaction(TIMEOUT))
        second.begin_transaction()
        second.produce(topic, b"second", partition=0)
        out["second_commit"] = _failure(lambda: second.commit_transaction(TIMEOUT))
        return out

    kafka, oncelog = run_both(brokers, scenario)
    assert oncelog == kafka
