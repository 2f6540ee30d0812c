"""AlterConfigs and IncrementalAlterConfigs against a running broker: each operation, validate_only, Kafka's
errors, persistence across a restart, and live partition logs following the new values."""

from __future__ import annotations

import json
import time

import pytest
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.records import SimpleRecord, encode_batch
from oncelog.protocol.records.batch import parse_header

from broker.helpers import batch, create_topic_body, fetch_body, produce_body
from broker.test_compaction import FAST_CLEANER, _read_all, _wait_compacted

TOPIC, BROKER = 2, 4
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
DYNAMIC_TOPIC_CONFIG, DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG = 1, 2, 3, 5


def _incremental(resources: list[tuple[int, str, list[tuple[str, int, str | None]]]], validate_only=False) -> dict:
    return {
        "resources": [
            {
                "resource_type": kind,
                "resource_name": name,
                "configs": [{"name": k, "config_operation": op, "value": v} for k, op, v in ops],
            }
            for kind, name, ops in resources
        ],
        "validate_only": validate_only,
    }


def _legacy(resources: list[tuple[int, str, dict[str, str | None]]], validate_only=False) -> dict:
    return {
        "resources": [
            {
                "resource_type": kind,
                "resource_name": name,
                "configs": [{"name": k, "value": v} for k, v in configs.items()],
            }
            for kind, name, configs in resources
        ],
        "validate_only": validate_only,
    }


async def _alter(client, topic: str, *ops: tuple[str, int, str | None], validate_only=False, version=1):
    """One IncrementalAlterConfigs of ``topic``: its (error code, message)."""
    body = _incremental([(TOPIC, topic, list(ops))], validate_only)
    response = (await client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, version, body)).responses[0]
    assert (response.resource_type, response.resource_name) == (TOPIC, topic)
    return response.error_code, response.error_message


async def _replace(client, topic: str, configs: dict[str, str | None], validate_only=False, version=2):
    """One AlterConfigs of ``topic``: its (error code, message)."""
    body = _legacy([(TOPIC, topic, configs)], validate_only)
    response = (await client.request(ApiKey.ALTER_CONFIGS, version, body)).responses[0]
    return response.error_code, response.error_message


async def _described(client, kind: int, name: str, synonyms: bool = False) -> list:
    """DescribeConfigs v4 of one resource: its config entries."""
    body = {
        "resources": [{"resource_type": kind, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": synonyms,
        "include_documentation": False,
    }
    result = (await client.request(ApiKey.DESCRIBE_CONFIGS, 4, body)).results[0]
    assert result.error_code == ErrorCode.NONE
    return result.configs


async def _describe(client, topic: str) -> dict[str, tuple[str, int]]:
    return {c.name: (c.value, c.config_source) for c in await _described(client, TOPIC, topic)}


async def _create(client, name: str, partitions: int = 1, **configs: str) -> None:
    configs = {k.replace("_", "."): v for k, v in configs.items()}
    response = await client.request(ApiKey.CREATE_TOPICS, 5, create_topic_body(name, partitions, configs=configs))
    assert response.topics[0].error_code == ErrorCode.NONE


async def _produce(client, topic: str, records: bytes) -> int:
    response = await client.request(ApiKey.PRODUCE, 7, produce_body(topic, 0, records))
    return response.responses[0].partition_responses[0].error_code


OK = (ErrorCode.NONE, None)


async def test_incremental_set_append_subtract_delete(broker, client) -> None:
    await _create(client, "ops", partitions=2)
    assert await _alter(client, "ops", ("retention.ms", SET, "60000"), ("max.message.bytes", SET, "5000")) == OK
    described = await _describe(client, "ops")
    assert described["retention.ms"] == ("60000", DYNAMIC_TOPIC_CONFIG)
    assert described["max.message.bytes"] == ("5000", DYNAMIC_TOPIC_CONFIG)
    assert described["segment.bytes"] == ("1073741824", DEFAULT_CONFIG)

    # APPEND starts from the default "delete"; an item already there is not added twice.
    assert await _alter(client, "ops", ("cleanup.policy", APPEND, "compact,delete"), version=0) == OK
    assert (await _describe(client, "ops"))["cleanup.policy"] == ("delete,compact", DYNAMIC_TOPIC_CONFIG)
    assert await _alter(client, "ops", ("cleanup.policy", SUBTRACT, "delete")) == OK
    assert await _alter(client, "ops", ("retention.ms", DELETE, None)) == OK
    described = await _describe(client, "ops")
    assert described["cleanup.policy"] == ("compact", DYNAMIC_TOPIC_CONFIG)
    assert described["retention.ms"] == ("604800000", DEFAULT_CONFIG)
    assert broker.node.metadata.get("ops").configs == {"max.message.bytes": "5000", "cleanup.policy": "compact"}
    for partition in range(2):
        config = broker.node.logs.get("ops", partition).config
        assert (config.retention_ms, config.max_message_bytes, config.cleanup_policy) == (604800000, 5000, ("compact",))


async def test_alter_configs_replaces_the_whole_override_set(broker, client) -> None:
    await _create(client, "whole", retention_ms="1234", segment_bytes="4096")
    for version in (0, 1, 2):
        assert await _replace(client, "whole", {"max.message.bytes": "2000"}, version=version) == OK
    described = await _describe(client, "whole")
    assert described["max.message.bytes"] == ("2000", DYNAMIC_TOPIC_CONFIG)
    assert described["retention.ms"] == ("604800000", DEFAULT_CONFIG)
    assert described["segment.bytes"] == ("1073741824", DEFAULT_CONFIG)
    config = broker.node.logs.get("whole", 0).config
    assert (config.max_message_bytes, config.retention_ms, config.segment_bytes) == (2000, 604800000, 1073741824)
    assert await _replace(client, "whole", {}) == OK
    assert broker.node.metadata.get("whole").configs == {}


async def test_validate_only_checks_but_changes_nothing(broker, client) -> None:
    await _create(client, "dry", retention_ms="1234")
    topics_json = (broker.node.data_dir / "topics.json").read_bytes()
    before = await _describe(client, "dry")
    assert await _alter(client, "dry", ("retention.ms", SET, "99"), validate_only=True) == OK
    assert await _replace(client, "dry", {"segment.bytes": "4096"}, validate_only=True) == OK
    assert (await _alter(client, "dry", ("retention.ms", SET, "x"), validate_only=True))[0] == ErrorCode.INVALID_CONFIG
    assert await _describe(client, "dry") == before
    assert (broker.node.data_dir / "topics.json").read_bytes() == topics_json
    assert broker.node.logs.get("dry", 0).config.retention_ms == 1234


@pytest.mark.parametrize(
    ("ops", "error", "message"),
    [
        (
            [("retention.ms", APPEND, "5")],
            ErrorCode.INVALID_CONFIG,
            "Can't APPEND to key retention.ms because its type is not LIST.",
        ),
        ([("no.such.config", SET, "1")], ErrorCode.INVALID_CONFIG, "Unknown topic config name: no.such.config"),
        (
            [("retention.ms", SET, "soon")],
            ErrorCode.INVALID_CONFIG,
            "Invalid value soon for configuration retention.ms: Not a number",
        ),
        (
            [("retention.ms", SET, "-2")],
            ErrorCode.INVALID_CONFIG,
            "Invalid value -2 for configuration retention.ms: Value must be at least -1",
        ),
        (
            [("segment.bytes", SET, "13")],
            ErrorCode.INVALID_CONFIG,
            "Invalid value 13 for configuration segment.bytes: Value must be at least 14",
        ),
        (
            [("flush.messages", SET, "0")],
            ErrorCode.INVALID_CONFIG,
            "Invalid value 0 for configuration flush.messages: Value must be at least 1",
        ),
        (
            [("flush.ms", SET, "-1")],
            ErrorCode.INVALID_CONFIG,
            "Invalid value -1 for configuration flush.ms: Value must be at least 0",
        ),
        (
            [("cleanup.policy", SET, "forever")],
            ErrorCode.INVALID_CONFIG,
            "Invalid value forever for configuration cleanup.policy: String must be one of: compact, delete",
        ),
        (
            [("cleanup.policy", SUBTRACT, "delete")],
            ErrorCode.INVALID_CONFIG,
            "Invalid value  for configuration cleanup.policy: String must be one of: compact, delete",
        ),
        (
            [("retention.ms", SET, "1"), ("retention.ms", DELETE, None)],
            ErrorCode.INVALID_REQUEST,
            "Error due to duplicate config keys",
        ),
        ([("retention.ms", SET, None)], ErrorCode.INVALID_REQUEST, "Null value not supported for : retention.ms"),
        ([("retention.ms", 9, "1")], ErrorCode.INVALID_REQUEST, "Unknown operations type 9"),
    ],
)
async def test_refused_changes_leave_the_topic_as_it_was(broker, client, ops, error, message) -> None:
    await _create(client, "strict", retention_ms="1234")
    assert await _alter(client, "strict", *ops) == (error, message)
    assert broker.node.metadata.get("strict").configs == {"retention.ms": "1234"}
    assert broker.node.logs.get("strict", 0).config.retention_ms == 1234


async def test_resource_errors(client) -> None:
    await _create(client, "mixed")
    assert await _alter(client, "missing", ("retention.ms", SET, "1")) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "The topic 'missing' does not exist.",
    )
    # Kafka looks the topic up first: an unknown config of a missing topic is UNKNOWN_TOPIC_OR_PARTITION too.
    assert await _alter(client, "missing", ("retention.forever", SET, "1")) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "The topic 'missing' does not exist.",
    )
    assert await _replace(client, "missing", {"retention.ms": "1"}) == (
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        "The topic 'missing' does not exist.",
    )
    assert await _replace(client, "mixed", {"retention.ms": None}) == (
        ErrorCode.INVALID_REQUEST,
        "Null value not supported for : retention.ms",
    )
    # Each resource is answered on its own, in request order; one named twice is refused each time.
    body = _incremental(
        [
            (TOPIC, "mixed", [("retention.ms", SET, "1000")]),
            (TOPIC, "twice", [("retention.ms", SET, "1")]),
            (TOPIC, "twice", [("retention.ms", SET, "2")]),
            (1, "whatever", []),
            (TOPIC, "", [("retention.ms", SET, "1")]),
            (TOPIC, "bad/name", [("retention.ms", SET, "1")]),
        ]
    )
    responses = (await client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)).responses
    assert [(r.resource_type, r.resource_name, r.error_code) for r in responses] == [
        (TOPIC, "mixed", ErrorCode.NONE),
        (TOPIC, "twice", ErrorCode.INVALID_REQUEST),
        (TOPIC, "twice", ErrorCode.INVALID_REQUEST),
        (1, "whatever", ErrorCode.INVALID_REQUEST),
        (TOPIC, "", ErrorCode.INVALID_REQUEST),
        (TOPIC, "bad/name", ErrorCode.INVALID_TOPIC_EXCEPTION),
    ]
    assert responses[1].error_message == "Each resource must appear at most once."
    assert (await _describe(client, "mixed"))["retention.ms"] == ("1000", DYNAMIC_TOPIC_CONFIG)


async def _alter_broker(client, name: str, *ops, validate_only=False) -> tuple[int, str | None]:
    body = _incremental([(BROKER, name, list(ops))], validate_only)
    response = (await client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)).responses[0]
    return response.error_code, response.error_message


async def _describe_broker(client, name: str) -> dict[str, tuple[str | None, int, bool, list[int]]]:
    configs = await _described(client, BROKER, name, synonyms=True)
    return {c.name: (c.value, c.config_source, c.read_only, [s.source for s in c.synonyms]) for c in configs}


async def test_dynamic_broker_configs_apply_live_and_persist(start_broker, tmp_path) -> None:
    """Kafka's dynamic broker configs: the cluster default ("") and this broker's own (its id, which wins), applied
    to every topic log without an override, described with their sources, kept across a restart."""
    data = tmp_path / "dynamic-data"
    broker = await start_broker(data)
    client = await broker.connect()
    await _create(client, "plain")
    await _create(client, "own", retention_ms="5555")
    assert await _alter_broker(client, "", ("log.retention.ms", SET, "1000"), ("log.cleaner.threads", SET, "2")) == (
        ErrorCode.NONE,
        None,
    )
    assert broker.node.logs.get("plain", 0).config.retention_ms == 1000
    assert broker.node.logs.get("own", 0).config.retention_ms == 5555
    assert (await _describe(client, "plain"))["retention.ms"] == ("1000", DYNAMIC_DEFAULT_BROKER_CONFIG)
    cluster = await _describe_broker(client, "")
    assert cluster == {
        "log.retention.ms": ("1000", DYNAMIC_DEFAULT_BROKER_CONFIG, False, [DYNAMIC_DEFAULT_BROKER_CONFIG]),
        "log.cleaner.threads": ("2", DYNAMIC_DEFAULT_BROKER_CONFIG, False, [DYNAMIC_DEFAULT_BROKER_CONFIG]),
    }
    assert await _alter_broker(client, "1", ("log.retention.ms", SET, "2000")) == (ErrorCode.NONE, None)
    assert broker.node.logs.get("plain", 0).config.retention_ms == 2000
    own = await _describe_broker(client, "1")
    assert own["log.retention.ms"] == (
        "2000",
        DYNAMIC_BROKER_CONFIG,
        False,
        [DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, DEFAULT_CONFIG],
    )
    assert own["num.partitions"] == ("1", DEFAULT_CONFIG, True, [DEFAULT_CONFIG])
    assert own["log.cleaner.threads"][:3] == ("2", DYNAMIC_DEFAULT_BROKER_CONFIG, False)
    # validate_only changes nothing; a new topic's logs are made with the dynamic default.
    assert await _alter_broker(client, "", ("log.segment.bytes", SET, "4096"), validate_only=True) == (
        ErrorCode.NONE,
        None,
    )
    assert broker.node.logs.get("plain", 0).config.segment_bytes == 1073741824
    assert await _alter_broker(client, "", ("log.segment.bytes", SET, "4096")) == (ErrorCode.NONE, None)
    await _create(client, "later")
    assert broker.node.logs.get("later", 0).config.segment_bytes == 4096
    await broker.stop()

    broker = await start_broker(data)
    client = await broker.connect()
    assert broker.node.logs.get("plain", 0).config.retention_ms == 2000
    assert broker.node.logs.get("plain", 0).config.segment_bytes == 4096
    assert await _alter_broker(client, "1", ("log.retention.ms", DELETE, None)) == (ErrorCode.NONE, None)
    assert broker.node.logs.get("plain", 0).config.retention_ms == 1000  # the cluster default again


@pytest.mark.parametrize(
    ("name", "ops", "message"),
    [
        ("1", [("num.partitions", SET, "3")], "Cannot update these configs dynamically: Set(num.partitions)"),
        ("", [("log.retention.hours", SET, "1")], "Cannot update these configs dynamically: Set(log.retention.hours)"),
        (
            "1",
            [("ssl.keystore.location", SET, "/k.pem")],
            "These security configs can be dynamically updated only per-listener using the listener prefix: "
            "Set(ssl.keystore.location)",
        ),
        (
            "",
            [("listener.name.PLAINTEXT.ssl.keystore.location", SET, "/k.pem")],
            "Cannot update these configs at default cluster level, broker id must be specified: "
            "Set(listener.name.PLAINTEXT.ssl.keystore.location)",
        ),
        (
            "",
            [("log.retention.ms", SET, "soon")],
            "Invalid value soon for configuration log.retention.ms: Not a number",
        ),
        ("", [("log.segment.bytes", SET, "10")], "log.segment.bytes must be at least 14"),
        ("7", [("log.retention.ms", SET, "1000")], "Unexpected broker id, expected 1, but received 7"),
    ],
)
async def test_refused_broker_config_changes(broker, client, name, ops, message) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs: INVALID_REQUEST with its message, nothing stored."""
    assert await _alter_broker(client, name, *ops) == (ErrorCode.INVALID_REQUEST, message)
    assert broker.node.dynamic_configs.cluster == {} and broker.node.dynamic_configs.broker == {}
    assert not (broker.node.data_dir / "dynamic-broker-configs.json").exists()
    assert broker.node.config.get_int("log.retention.ms") == 604800000


async def test_dynamic_configs_oncelog_does_not_read_are_kept(broker, client) -> None:
    """Kafka's other dynamic configs (SASL/Kerberos, per-listener TLS stores, thread pools) are accepted for this
    broker, kept and described (secrets without their value); they change nothing in oncelog."""
    ops = [
        ("sasl.kerberos.min.time.before.relogin", SET, "90000"),
        ("listener.name.PLAINTEXT.ssl.keystore.location", SET, "/etc/kafka/ks.p12"),
        ("listener.name.PLAINTEXT.ssl.keystore.password", SET, "secret"),
        ("num.io.threads", SET, "16"),
    ]
    assert await _alter_broker(client, "1", *ops) == (ErrorCode.NONE, None)
    described = await _describe_broker(client, "1")
    assert described["sasl.kerberos.min.time.before.relogin"][:3] == ("90000", DYNAMIC_BROKER_CONFIG, False)
    assert described["listener.name.PLAINTEXT.ssl.keystore.location"][:2] == (
        "/etc/kafka/ks.p12",
        DYNAMIC_BROKER_CONFIG,
    )
    assert described["listener.name.PLAINTEXT.ssl.keystore.password"][:2] == (None, DYNAMIC_BROKER_CONFIG)
    assert described["num.io.threads"][:2] == ("16", DYNAMIC_BROKER_CONFIG)
    assert await _alter_broker(client, "", ("num.io.threads", SET, "8")) == (ErrorCode.NONE, None)
    assert (await _describe_broker(client, "1"))["num.io.threads"][:2] == ("16", DYNAMIC_BROKER_CONFIG)


async def test_broker_list_operations(broker, client) -> None:
    """APPEND / SUBTRACT on broker configs: LIST configs only (Kafka's prepareIncrementalConfigs messages)."""
    assert await _alter_broker(client, "", ("log.cleanup.policy", APPEND, "compact")) == (ErrorCode.NONE, None)
    assert broker.node.dynamic_configs.cluster == {"log.cleanup.policy": "delete,compact"}
    assert broker.node.config.log_config().compacts
    assert await _alter_broker(client, "", ("log.retention.ms", APPEND, "1")) == (
        ErrorCode.INVALID_CONFIG,
        "Config value append is not allowed for config key: log.retention.ms",
    )
    assert await _alter_broker(client, "", ("no.such.config", SUBTRACT, "1")) == (
        ErrorCode.INVALID_CONFIG,
        "Unknown config name: no.such.config",
    )


async def test_legacy_alter_configs_replaces_the_broker_set(broker, client) -> None:
    for configs in ({"log.retention.ms": "1000", "log.roll.ms": "60000"}, {"log.roll.ms": "70000"}):
        body = _legacy([(BROKER, "", configs)])
        assert (await client.request(ApiKey.ALTER_CONFIGS, 0, body)).responses[0].error_code == ErrorCode.NONE
    assert broker.node.dynamic_configs.cluster == {"log.roll.ms": "70000"}
    assert broker.node.config.get_int("log.retention.ms") == 604800000
    assert broker.node.config.get_int("log.roll.ms") == 70000


async def test_internal_topics_keep_their_fixed_settings(broker, client) -> None:
    await broker.node.ensure_offsets_topic()
    topic = "__consumer_offsets"
    code, message = await _alter(client, topic, ("cleanup.policy", SET, "delete"))
    assert code == ErrorCode.INVALID_CONFIG
    assert message == f"Cannot change cleanup.policy of internal topic {topic}: fixed at cleanup.policy=compact"
    assert (await _alter(client, topic, ("segment.bytes", DELETE, None)))[0] == ErrorCode.INVALID_CONFIG
    assert await _alter(client, topic, ("cleanup.policy", SET, "compact"), ("retention.ms", SET, "5000")) == OK
    assert await _replace(client, topic, {"delete.retention.ms": "1000"}) == OK  # the fixed keys stay
    assert broker.node.metadata.get(topic).configs == {
        "cleanup.policy": "compact",
        "segment.bytes": "104857600",
        "delete.retention.ms": "1000",
    }
    config = broker.node.logs.get(topic, 0).config
    assert (config.cleanup_policy, config.delete_retention_ms) == (("compact",), 1000)


async def test_changes_are_persisted_and_survive_a_restart(start_broker, tmp_path) -> None:
    data = tmp_path / "restart-data"
    broker = await start_broker(data)
    client = await broker.connect()
    await _create(client, "kept", partitions=2)
    assert await _alter(client, "kept", ("retention.ms", SET, "4321"), ("cleanup.policy", SET, "compact")) == OK
    on_disk = json.loads((data / "topics.json").read_text())["topics"]["kept"]["configs"]
    assert on_disk == {"retention.ms": "4321", "cleanup.policy": "compact"}  # written before the answer
    await broker.stop()

    broker = await start_broker(data)
    client = await broker.connect()
    described = await _describe(client, "kept")
    assert described["retention.ms"] == ("4321", DYNAMIC_TOPIC_CONFIG)
    assert described["cleanup.policy"] == ("compact", DYNAMIC_TOPIC_CONFIG)
    for partition in range(2):
        config = broker.node.logs.get("kept", partition).config
        assert (config.retention_ms, config.cleanup_policy) == (4321, ("compact",))


async def test_lowered_retention_deletes_old_segments_at_the_next_sweep(broker, client) -> None:
    await _create(client, "aging", segment_bytes="200")
    hour_ago = int(time.time() * 1000) - 3_600_000
    for i in range(5):
        assert await _produce(client, "aging", batch([b"old-%d" % i * 10], now_ms=hour_ago)) == ErrorCode.NONE
    partition_log = broker.node.logs.get("aging", 0)
    assert len(partition_log.segments) == 5
    broker.node._sweep_retention()
    assert partition_log.log_start_offset == 0  # a week's retention keeps them

    assert await _alter(client, "aging", ("retention.ms", SET, "60000")) == OK
    broker.node._sweep_retention()
    assert (partition_log.log_start_offset, len(partition_log.segments)) == (4, 1)


async def test_lowered_segment_bytes_rolls_at_the_next_append(broker, client) -> None:
    await _create(client, "rolling")
    for i in range(3):
        assert await _produce(client, "rolling", batch([b"v%d" % i])) == ErrorCode.NONE
    partition_log = broker.node.logs.get("rolling", 0)
    assert len(partition_log.segments) == 1
    assert await _alter(client, "rolling", ("segment.bytes", SET, "100")) == OK
    assert await _produce(client, "rolling", batch([b"next"])) == ErrorCode.NONE
    assert [s.base_offset for s in partition_log.segments] == [0, 3]


async def test_lowered_max_message_bytes_refuses_larger_batches(client) -> None:
    await _create(client, "sized")
    large = batch([b"x" * 3000])
    assert await _produce(client, "sized", large) == ErrorCode.NONE
    assert await _alter(client, "sized", ("max.message.bytes", SET, "2000")) == OK
    assert await _produce(client, "sized", large) == ErrorCode.MESSAGE_TOO_LARGE
    assert await _produce(client, "sized", batch([b"small"])) == ErrorCode.NONE
    assert await _alter(client, "sized", ("max.message.bytes", DELETE, None)) == OK
    assert await _produce(client, "sized", large) == ErrorCode.NONE


async def test_switching_cleanup_policy_starts_and_stops_compaction(start_broker) -> None:
    broker = await start_broker(**FAST_CLEANER)
    client = await broker.connect()
    await _create(client, "table", segment_bytes="1024")
    written = []
    for i in range(60):
        key, value = b"key-%d" % (i % 3), b"value-%d" % i
        response = await client.request(
            ApiKey.PRODUCE, 7, produce_body("table", 0, encode_batch([SimpleRecord(key, value)]))
        )
        written.append((response.responses[0].partition_responses[0].base_offset, key, value))
    segments = len(broker.node.logs.get("table", 0).segments)
    assert segments > 3 and len(await _read_all(client, "table")) == 60  # "delete" does not compact

    assert await _alter(client, "table", ("cleanup.policy", SET, "compact")) == OK
    keyless = encode_batch([SimpleRecord(None, b"no key")])
    assert await _produce(client, "table", keyless) == ErrorCode.INVALID_RECORD  # a compacted log needs keys
    await _wait_compacted(broker, "table", 0, most_segments=2)
    assert len(await _read_all(client, "table")) < 60

    assert await _alter(client, "table", ("cleanup.policy", SET, "delete")) == OK
    assert await _produce(client, "table", keyless) == ErrorCode.NONE


async def test_a_change_that_cannot_be_saved_changes_nothing(broker, client, monkeypatch) -> None:
    await _create(client, "unsaved", retention_ms="1234")

    def disk_full(path, data) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("oncelog.broker.metadata.atomic_write", disk_full)
    code, message = await _alter(client, "unsaved", ("retention.ms", SET, "1"))
    assert code == ErrorCode.KAFKA_STORAGE_ERROR and "No space left" in message
    assert broker.node.metadata.get("unsaved").configs == {"retention.ms": "1234"}
    assert broker.node.logs.get("unsaved", 0).config.retention_ms == 1234


async def test_log_append_time_is_given_to_batches_and_answered_and_follows_a_change(broker, client) -> None:
    await _create(client, "stamped", message_timestamp_type="LogAppendTime")
    created_at = 1_000_000  # the producer's CreateTime, long ago

    async def produce() -> tuple[int, int]:
        records = batch([b"v"], now_ms=created_at)
        response = await client.request(ApiKey.PRODUCE, 8, produce_body("stamped", 0, records))
        partition = response.responses[0].partition_responses[0]
        assert partition.error_code == ErrorCode.NONE
        return partition.base_offset, partition.log_append_time_ms

    before = int(time.time() * 1000)
    offset, appended_at = await produce()
    assert before <= appended_at <= int(time.time() * 1000)
    fetched = await client.request(ApiKey.FETCH, 11, fetch_body("stamped", 0, offset))
    header = parse_header(fetched.responses[0].partitions[0].records)
    assert (header.timestamp_type, header.max_timestamp, header.base_timestamp) == (1, appended_at, created_at)

    assert await _alter(client, "stamped", ("message.timestamp.type", SET, "CreateTime")) == OK
    offset, appended_at = await produce()
    assert appended_at == -1
    fetched = await client.request(ApiKey.FETCH, 11, fetch_body("stamped", 0, offset))
    header = parse_header(fetched.responses[0].partitions[0].records)
    assert (header.timestamp_type, header.max_timestamp) == (0, created_at)


async def test_min_insync_replicas_above_one_refuses_acks_all(broker, client) -> None:
    """A single node is every partition's only in-sync replica: min.insync.replicas=2 refuses acks=all appends
    (NOT_ENOUGH_REPLICAS, nothing written), as a one-broker Kafka does, and acks=1 still goes through."""
    await _create(client, "guarded", min_insync_replicas="2")

    async def produce(acks: int) -> tuple[int, str | None]:
        body = produce_body("guarded", 0, batch([b"v"]), acks=acks)
        partition = (await client.request(ApiKey.PRODUCE, 8, body)).responses[0].partition_responses[0]
        return partition.error_code, partition.error_message

    code, message = await produce(-1)
    assert code == ErrorCode.NOT_ENOUGH_REPLICAS
    assert message == (
        "The size of the current ISR 1 is insufficient to satisfy the min.isr requirement of 2 for partition guarded-0"
    )
    assert broker.node.logs.get("guarded", 0).log_end_offset == 0
    assert await produce(1) == (ErrorCode.NONE, None)
    assert await _alter(client, "guarded", ("min.insync.replicas", DELETE, None)) == OK
    assert await produce(-1) == (ErrorCode.NONE, None)


GROUP_RESOURCE, GROUP_CONFIG, INT_TYPE = 32, 8, 3


async def _alter_group(client, group: str, *ops, validate_only=False) -> tuple[int, str | None]:
    body = _incremental([(GROUP_RESOURCE, group, list(ops))], validate_only)
    response = (await client.request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, body)).responses[0]
    assert (response.resource_type, response.resource_name) == (GROUP_RESOURCE, group)
    return response.error_code, response.error_message


async def test_group_configs(start_broker, tmp_path) -> None:
    """KIP-848 GROUP config resources (Kafka's GroupConfig): the broker defaults until set, Kafka's validation,
    persisted across a restart; the group need not exist."""
    data = tmp_path / "group-data"
    broker = await start_broker(data)
    client = await broker.connect()
    configs = await _described(client, GROUP_RESOURCE, "g1", synonyms=True)
    assert [(c.name, c.value, c.config_source, c.read_only, c.config_type) for c in configs] == [
        ("consumer.session.timeout.ms", "45000", DEFAULT_CONFIG, False, INT_TYPE),
        ("consumer.heartbeat.interval.ms", "5000", DEFAULT_CONFIG, False, INT_TYPE),
    ]
    for ops, code, message in (
        ([("consumer.session.timeout.ms", SET, "1000")], ErrorCode.INVALID_CONFIG,
         "consumer.session.timeout.ms must be greater than or equal to group.consumer.min.session.timeout.ms"),
        ([("consumer.heartbeat.interval.ms", SET, "20000")], ErrorCode.INVALID_CONFIG,
         "consumer.heartbeat.interval.ms must be less than or equal to group.consumer.max.heartbeat.interval.ms"),
        ([("consumer.session.timeout.ms", SET, "soon")], ErrorCode.INVALID_CONFIG,
         "Invalid value soon for configuration consumer.session.timeout.ms: Not a number"),
        ([("share.record.lock.duration.ms", SET, "1")], ErrorCode.INVALID_CONFIG,
         "Unknown group config name: share.record.lock.duration.ms"),
        ([("consumer.session.timeout.ms", SET, None)], ErrorCode.INVALID_REQUEST,
         "Null value not supported for : consumer.session.timeout.ms"),
    ):  # fmt: skip
        assert await _alter_group(client, "g1", *ops) == (code, message)
    assert await _alter_group(client, "", ("consumer.session.timeout.ms", SET, "50000")) == (
        ErrorCode.INVALID_REQUEST,
        "Default group resources are not allowed.",
    )
    assert await _alter_group(client, "g1", ("consumer.session.timeout.ms", SET, "50000"), validate_only=True) == (
        ErrorCode.NONE,
        None,
    )
    assert broker.node.group_configs.of("g1") == {}
    assert await _alter_group(client, "g1", ("consumer.session.timeout.ms", SET, "50000")) == (ErrorCode.NONE, None)
    await broker.stop()

    broker = await start_broker(data)
    client = await broker.connect()
    configs = {c.name: (c.value, c.config_source) for c in await _described(client, GROUP_RESOURCE, "g1")}
    assert configs == {
        "consumer.session.timeout.ms": ("50000", GROUP_CONFIG),
        "consumer.heartbeat.interval.ms": ("5000", DEFAULT_CONFIG),
    }
    assert await _alter_group(client, "g1", ("consumer.session.timeout.ms", DELETE, None)) == (ErrorCode.NONE, None)
    assert broker.node.group_configs.of("g1") == {}
    body = {
        "resources": [{"resource_type": GROUP_RESOURCE, "resource_name": "", "configuration_keys": None}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    result = (await client.request(ApiKey.DESCRIBE_CONFIGS, 4, body)).results[0]
    assert (result.error_code, result.error_message) == (ErrorCode.INVALID_REQUEST, "Group name must not be empty")
