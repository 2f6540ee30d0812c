"""Broker configuration: Kafka property names and defaults, loaded from a properties file plus overrides.

Every setting keeps Apache Kafka's property name. Defaults are Kafka's, with one deliberate exception:
``log.flush.interval.messages`` defaults to 1 (fsync before acknowledging, group-committed) where Kafka defaults to
Long.MAX_VALUE (page cache only). Set it higher, or set ``log.flush.interval.ms``, to select page-cache mode; a topic's
``flush.messages`` / ``flush.ms`` override them for its partitions (``LogConfig.fsync_before_ack``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from oncelog.broker.delay.buffer import DELAY_MAX_BUFFERED_RECORDS
from oncelog.broker.delay.topics import DELAY_TOPIC_NUM_PARTITIONS
from oncelog.broker.kafka_properties import (
    NOT_USED,
    alias_names,
    drop_listeners,
    not_used_reason,
    resolve_aliases,
    suggestion,
)
from oncelog.client.delay import DEFAULT_DELAY_LEVELS, parse_levels
from oncelog.storage.config import COMPRESSION_CODECS, LogConfig


class ConfigError(ValueError):
    """A configuration value is unknown or malformed."""


@dataclass(frozen=True)
class PropertySpec:
    """One broker property: its Kafka name, type, default and documentation."""

    name: str
    kind: type
    default: object
    doc: str
    topic_name: str | None = None  # the per-topic override name, where Kafka has one
    #: For a comma-separated list (Kafka's LIST type): the items it may hold; the value must name at least one.
    list_items: frozenset[str] | None = None
    #: The only values a string property may take (Kafka's ``in(...)`` validator).
    choices: tuple[str, ...] | None = None
    #: Kafka's lower bound (``atLeast``) on the topic-level value, checked for topic overrides.
    topic_minimum: int | None = None
    #: A secret (Kafka's PASSWORD type): DescribeConfigs gives no value for it.
    sensitive: bool = False


#: Every property the broker understands, Kafka's name -> spec. Unknown names are rejected at start-up.
PROPERTIES: dict[str, PropertySpec] = {
    s.name: s
    for s in (
        PropertySpec("node.id", int, 1, "This broker's id."),
        PropertySpec("log.dirs", str, "./oncelog-data", "Directory holding the partition logs."),
        PropertySpec(
            "listeners",
            str,
            "PLAINTEXT://127.0.0.1:9092",
            "Where the broker listens: comma-separated NAME://HOST:PORT (HOST:PORT alone is PLAINTEXT).",
        ),
        PropertySpec(
            "advertised.listeners",
            str,
            "",
            "Addresses given to clients, NAME://HOST:PORT per listener (default: the listener's own).",
        ),
        PropertySpec(
            "listener.security.protocol.map",
            str,
            "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            "Listener name -> security protocol (PLAINTEXT, SASL_PLAINTEXT; SSL and SASL_SSL not served yet).",
        ),
        PropertySpec(
            "sasl.enabled.mechanisms",
            str,
            "GSSAPI",
            "SASL mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 (Kafka's default GSSAPI is not "
            "supported: a SASL listener then refuses to start).",
        ),
        PropertySpec("num.partitions", int, 1, "Partitions of an auto-created topic."),
        PropertySpec("default.replication.factor", int, 1, "Replication factor of an auto-created topic."),
        PropertySpec("auto.create.topics.enable", bool, True, "Create unknown topics on Metadata requests."),
        PropertySpec("delete.topic.enable", bool, True, "Allow DeleteTopics."),
        PropertySpec(
            "message.max.bytes", int, 1048588, "Largest record batch accepted.", "max.message.bytes", topic_minimum=0
        ),
        PropertySpec("socket.request.max.bytes", int, 104857600, "Largest request frame accepted."),
        PropertySpec(
            "queued.max.request.bytes",
            int,
            268435456,
            "Request bytes all connections may hold at once (a frame reserves its size when its size prefix arrives; "
            "a connection waits, not reading, until its frame fits). Kafka's default -1 (unbounded); oncelog's bounds "
            "the broker's request memory.",
        ),
        PropertySpec(
            "fetch.max.bytes",
            int,
            57671680,
            "Most record bytes one Fetch response carries (with the request's max_bytes; the first batch is returned "
            "whole even if larger, KIP-74).",
        ),
        PropertySpec("connections.max.idle.ms", int, 600000, "Idle connections are closed after this."),
        PropertySpec(
            "connection.failed.authentication.delay.ms",
            int,
            100,
            "How long a connection whose SASL authentication failed stays open after the error response is sent.",
        ),
        # segment.bytes at least LegacyRecord.RECORD_OVERHEAD_V0, as in Kafka's LogConfig.
        PropertySpec(
            "log.segment.bytes",
            int,
            1073741824,
            "Segment size that triggers a roll.",
            "segment.bytes",
            topic_minimum=14,
        ),
        PropertySpec("log.roll.ms", int, 604800000, "Segment age that triggers a roll.", "segment.ms", topic_minimum=1),
        PropertySpec(
            "log.index.interval.bytes",
            int,
            4096,
            "Bytes between offset index entries.",
            "index.interval.bytes",
            topic_minimum=0,
        ),
        PropertySpec(
            "log.index.size.max.bytes",
            int,
            10485760,
            "Maximum offset index size.",
            "segment.index.bytes",
            topic_minimum=4,
        ),
        PropertySpec(
            "log.retention.ms",
            int,
            604800000,
            "Delete segments older than this (-1: never).",
            "retention.ms",
            topic_minimum=-1,
        ),
        PropertySpec(
            "log.retention.bytes", int, -1, "Delete old segments above this size (-1: never).", "retention.bytes"
        ),
        PropertySpec("log.retention.check.interval.ms", int, 300000, "How often retention runs."),
        PropertySpec(
            "log.flush.interval.messages",
            int,
            1,
            "Messages accumulated before an fsync; 1 = fsync before acknowledging.",
            "flush.messages",
            topic_minimum=1,
        ),
        PropertySpec(
            "log.flush.interval.ms",
            int,
            -1,
            "Maximum time data stays unflushed (-1: unset).",
            "flush.ms",
            topic_minimum=0,
        ),
        PropertySpec("log.flush.scheduler.interval.ms", int, 1000, "How often page-cache mode checks for flushes."),
        PropertySpec("log.flush.offset.checkpoint.interval.ms", int, 60000, "How often recovery points are saved."),
        PropertySpec(
            "file.delete.delay.ms",
            int,
            60000,
            "Delay before deleted segment files are removed.",
            "file.delete.delay.ms",
            topic_minimum=0,
        ),
        PropertySpec("producer.id.expiration.ms", int, 86400000, "Idle producer ids are forgotten after this."),
        PropertySpec(
            "log.cleanup.policy",
            str,
            "delete",
            "delete: old segments go by retention.ms/retention.bytes; compact: only the latest record per key is "
            "kept (both: both).",
            "cleanup.policy",
            list_items=frozenset({"delete", "compact"}),
        ),
        PropertySpec(
            "log.cleaner.delete.retention.ms",
            int,
            86400000,
            "How long compaction keeps a tombstone (a null value) that is its key's latest record.",
            "delete.retention.ms",
            topic_minimum=0,
        ),
        PropertySpec(
            "log.cleaner.max.compaction.lag.ms",
            int,
            9223372036854775807,
            "Longest a record of a compacted log stays uncompacted: the active segment rolls at this age (if below "
            "log.roll.ms) and the next compaction pass cleans it.",
            "max.compaction.lag.ms",
            topic_minimum=1,
        ),
        PropertySpec("log.cleaner.enable", bool, True, "Compact the logs whose cleanup.policy holds compact."),
        PropertySpec("log.cleaner.backoff.ms", int, 15000, "Pause between looks for logs to compact."),
        PropertySpec(
            "log.message.timestamp.type",
            str,
            "CreateTime",
            "Timestamp type.",
            "message.timestamp.type",
            choices=("CreateTime", "LogAppendTime"),
        ),
        PropertySpec(
            "log.message.timestamp.before.max.ms",
            int,
            9223372036854775807,
            "How far a CreateTime record's timestamp may be behind the broker's clock (KIP-937).",
            "message.timestamp.before.max.ms",
            topic_minimum=0,
        ),
        PropertySpec(
            "log.message.timestamp.after.max.ms",
            int,
            3600000,
            "How far a CreateTime record's timestamp may be ahead of the broker's clock (KIP-937; Kafka 4.0 default).",
            "message.timestamp.after.max.ms",
            topic_minimum=0,
        ),
        PropertySpec(
            "compression.type",
            str,
            "producer",
            "Codec of stored batches: 'producer' keeps each batch's own, a codec name recompresses the others.",
            "compression.type",
            choices=("producer", *COMPRESSION_CODECS),
        ),
        PropertySpec(
            "min.insync.replicas",
            int,
            1,
            "Replicas that must acknowledge acks=all.",
            "min.insync.replicas",
            topic_minimum=1,
        ),
        PropertySpec(
            "replica.lag.time.max.ms",
            int,
            30000,
            "How long a follower may go without catching up before the leader drops it from the ISR.",
        ),
        PropertySpec("replica.fetch.max.bytes", int, 1048576, "Bytes a follower asks per partition in a fetch."),
        PropertySpec("replica.fetch.response.max.bytes", int, 10485760, "Bytes a follower asks per fetch response."),
        PropertySpec("replica.fetch.wait.max.ms", int, 500, "How long a leader may hold a follower's fetch."),
        PropertySpec("replica.fetch.min.bytes", int, 1, "Bytes a follower's fetch waits for."),
        PropertySpec("replica.fetch.backoff.ms", int, 1000, "Pause of a follower's fetcher after an error."),
        PropertySpec(
            "max.incremental.fetch.session.cache.slots",
            int,
            1000,
            "Incremental fetch sessions (KIP-227) a leader keeps for its followers; 0 turns them off.",
        ),
        PropertySpec(
            "replica.high.watermark.checkpoint.interval.ms",
            int,
            5000,
            "How often a cluster member saves its high watermarks (replication-offset-checkpoint).",
        ),
        PropertySpec(
            "inter.broker.listener.name",
            str,
            "",
            "The listener brokers reach each other on (followers fetch from it); empty: the first listener.",
        ),
        PropertySpec("transaction.max.timeout.ms", int, 900000, "Largest transaction timeout a producer may ask for."),
        PropertySpec("transaction.state.log.num.partitions", int, 50, "Partitions of __transaction_state."),
        PropertySpec(
            "transaction.state.log.replication.factor",
            int,
            3,
            "Replicas of each __transaction_state partition on a cluster (a single node keeps one).",
        ),
        PropertySpec(
            "transaction.marker.wait.ms",
            int,
            5000,
            "How long EndTxn waits for its markers before answering with the outcome decided (oncelog's own; 0: "
            "answer once PrepareCommit/PrepareAbort is durable, as Kafka does).",
        ),
        PropertySpec(
            "offsets.topic.replication.factor",
            int,
            3,
            "Replicas of each __consumer_offsets partition on a cluster (a single node keeps one).",
        ),
        PropertySpec(
            "etcd.connect",
            str,
            "",
            "HOST:PORT[,HOST:PORT...][/ROOT] of the etcd holding the cluster's metadata; empty: a single node.",
        ),
        PropertySpec(
            "broker.session.timeout.ms",
            int,
            # Kafka's is 9000. A 2 s etcd lease (renewed every 2/3 s, etcd's smallest) bounds how long a paused or
            # cut-off leader keeps its partitions; a dead one's followers end its session sooner (cluster/liveness).
            # Raise it where a broker may stall longer than that.
            2000,
            "A broker whose etcd session lapses for this long leaves the cluster (etcd lease TTL, whole seconds).",
        ),
        PropertySpec("broker.rack", str, "", "This broker's rack, for rack-aware replica placement."),
        PropertySpec(
            "unclean.leader.election.enable",
            bool,
            False,
            "Elect a replica outside the ISR when no ISR member is alive (may lose acknowledged records).",
            "unclean.leader.election.enable",
        ),
        PropertySpec(
            "auto.leader.rebalance.enable", bool, True, "Move leadership back to preferred replicas periodically."
        ),
        PropertySpec(
            "leader.imbalance.check.interval.seconds", int, 300, "How often the controller checks leader balance."
        ),
        PropertySpec(
            "leader.imbalance.per.broker.percentage",
            int,
            10,
            "Share of a broker's preferred leaderships held elsewhere that triggers a rebalance.",
        ),
        PropertySpec(
            "controlled.shutdown.enable",
            bool,
            True,
            "On SIGTERM, move leadership away before stopping (cluster only).",
        ),
        PropertySpec(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            int,
            10000,
            "How often ongoing transactions past their timeout are aborted.",
        ),
        PropertySpec(
            "transactional.id.expiration.ms", int, 604800000, "Idle transactional ids are forgotten after this."
        ),
        PropertySpec("offsets.topic.num.partitions", int, 50, "Partitions of __consumer_offsets."),
        PropertySpec("offsets.retention.minutes", int, 10080, "Committed offsets of an empty group expire after this."),
        PropertySpec("offsets.retention.check.interval.ms", int, 600000, "How often stale offsets are expired."),
        PropertySpec("offset.metadata.max.bytes", int, 4096, "Largest metadata string of a committed offset."),
        PropertySpec(
            "group.initial.rebalance.delay.ms",
            int,
            3000,
            "How long the first rebalance of an empty group waits for more members to join.",
        ),
        PropertySpec("group.min.session.timeout.ms", int, 6000, "Smallest session timeout a member may ask for."),
        PropertySpec("group.max.session.timeout.ms", int, 1800000, "Largest session timeout a member may ask for."),
        PropertySpec("group.max.size", int, 2147483647, "Most members a consumer group may have."),
        # KIP-848 consumer groups: the defaults and bounds of the GROUP configs (broker/group_configs.py).
        PropertySpec(
            "group.consumer.session.timeout.ms", int, 45000, "Default consumer.session.timeout.ms of a group."
        ),
        PropertySpec("group.consumer.min.session.timeout.ms", int, 45000, "Lowest consumer.session.timeout.ms."),
        PropertySpec("group.consumer.max.session.timeout.ms", int, 60000, "Highest consumer.session.timeout.ms."),
        PropertySpec(
            "group.consumer.heartbeat.interval.ms", int, 5000, "Default consumer.heartbeat.interval.ms of a group."
        ),
        PropertySpec("group.consumer.min.heartbeat.interval.ms", int, 5000, "Lowest consumer.heartbeat.interval.ms."),
        PropertySpec("group.consumer.max.heartbeat.interval.ms", int, 15000, "Highest consumer.heartbeat.interval.ms."),
        # oncelog's own: delayed delivery (broker/delay, README "Delayed delivery, TTL and dead letters").
        PropertySpec("delay.service.enable", bool, True, "Run the DelayService inside the broker."),
        PropertySpec(
            "delay.levels", str, DEFAULT_DELAY_LEVELS, "Delay levels, each a topic __delay-<level> (e.g. 5s, 1m, 2h)."
        ),
        PropertySpec(
            "delay.topic.num.partitions", int, DELAY_TOPIC_NUM_PARTITIONS, "Partitions of each delay-level topic."
        ),
        PropertySpec(
            "delay.max.buffered.records",
            int,
            DELAY_MAX_BUFFERED_RECORDS,
            "Fetched records the DelayService holds per delay partition before pausing it.",
        ),
        PropertySpec(
            "delay.dead.letter.topic",
            str,
            "",
            "Where the DelayService sends records it cannot deliver (TTL run out, bad headers); empty: drop, log.",
        ),
    )
}

#: The ``ssl.*`` properties of an ``SSL://`` listener (Kafka's names and defaults; ``broker/tls.py`` reads them).
#: An empty value is Kafka's null.
PROPERTIES.update(
    (s.name, s)
    for s in (
        PropertySpec("ssl.keystore.type", str, "JKS", "Keystore format: PEM or PKCS12 (JKS cannot be read)."),
        PropertySpec("ssl.keystore.location", str, "", "Keystore file (PEM: private key and certificate chain)."),
        PropertySpec("ssl.keystore.password", str, "", "Password of a PKCS12 keystore.", sensitive=True),
        PropertySpec("ssl.key.password", str, "", "Password of the private key.", sensitive=True),
        PropertySpec("ssl.keystore.certificate.chain", str, "", "PEM certificate chain (KIP-651).", sensitive=True),
        PropertySpec("ssl.keystore.key", str, "", "PEM private key (KIP-651).", sensitive=True),
        PropertySpec("ssl.truststore.type", str, "JKS", "Truststore format: PEM or PKCS12 (JKS cannot be read)."),
        PropertySpec("ssl.truststore.location", str, "", "CA certificates client certificates are checked against."),
        PropertySpec("ssl.truststore.password", str, "", "Password of a PKCS12 truststore.", sensitive=True),
        PropertySpec("ssl.truststore.certificates", str, "", "PEM CA certificates (KIP-651).", sensitive=True),
        PropertySpec(
            "ssl.client.auth",
            str,
            "none",
            "Client certificates: none, requested (checked if sent) or required (mTLS).",
            choices=("required", "requested", "none"),
        ),
        PropertySpec("ssl.enabled.protocols", str, "TLSv1.2,TLSv1.3", "TLS versions accepted."),
        PropertySpec("ssl.protocol", str, "TLSv1.3", "Accepted for compatibility; ssl.enabled.protocols decides."),
        PropertySpec("ssl.cipher.suites", str, "", "Must stay empty: OpenSSL's default suites are used."),
    )
)

#: Topic-level name -> broker-level name, for CreateTopics configs and DescribeConfigs.
TOPIC_PROPERTIES: dict[str, str] = {s.topic_name: s.name for s in PROPERTIES.values() if s.topic_name}


#: Kafka's per-listener settings, ``listener.name.<listener>.<...>``, that this broker reads: a listener's own
#: ``sasl.enabled.mechanisms``, each mechanism's ``<mechanism>.sasl.jaas.config``, and a TLS listener's ``ssl.*``.
LISTENER_PROPERTY_PREFIX = "listener.name."
_LISTENER_PROPERTY_SUFFIXES = (
    "sasl.enabled.mechanisms",
    "sasl.jaas.config",
    *(name for name in PROPERTIES if name.startswith("ssl.")),
)


def known_property_names() -> set[str]:
    """Every broker property name oncelog accepts: read, aliased or not used (for "did you mean")."""
    return {*PROPERTIES, *alias_names(), *(name for group in NOT_USED for name in group.names)}


def is_listener_property(name: str) -> bool:
    """Whether ``name`` is a per-listener property this broker understands (see LISTENER_PROPERTY_PREFIX)."""
    return name.startswith(LISTENER_PROPERTY_PREFIX) and name.endswith(_LISTENER_PROPERTY_SUFFIXES)


def parse_value(spec: PropertySpec, raw: str, name: str | None = None) -> object:
    """Convert a property's text to its type; raises ConfigError in Kafka's words (``Invalid value X for
    configuration NAME: why``), naming ``name`` (default: the broker property's name)."""
    text = raw.strip()

    def invalid(why: str) -> ConfigError:
        return ConfigError(f"Invalid value {raw} for configuration {name or spec.name}: {why}")

    if spec.kind is bool:
        if text.lower() not in ("true", "false"):
            raise invalid("Expected value to be either true or false")
        return text.lower() == "true"
    if spec.kind is int:
        try:
            return int(text)
        except ValueError:
            raise invalid("Not a number") from None
    if spec.list_items is not None:
        items = list_items(text)
        if not items or not set(items) <= spec.list_items:
            raise invalid(f"String must be one of: {', '.join(sorted(spec.list_items))}")
    if spec.choices is not None and text not in spec.choices:
        raise invalid(f"String must be one of: {', '.join(spec.choices)}")
    return text


def list_items(text: str) -> tuple[str, ...]:
    """The items of a comma-separated list value (Kafka's LIST type), blanks dropped."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def read_properties_file(path: Path) -> dict[str, str]:
    """Parse a Java-style properties file (``key=value`` or ``key: value`` lines, ``#``/``!`` comments; a line ending
    in a backslash continues on the next, whose leading blanks are dropped, as in Java)."""
    result: dict[str, str] = {}
    for line in _logical_lines(path.read_text()):
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        sep = min((i for i in (stripped.find("="), stripped.find(":")) if i >= 0), default=-1)
        if sep < 0:
            raise ConfigError(f"{path}: cannot parse line {line!r}")
        result[stripped[:sep].strip()] = stripped[sep + 1 :].strip()
    return result


def _logical_lines(text: str) -> list[str]:
    """The lines of a properties file with Java's continuations joined (not those of comment lines)."""
    lines: list[str] = []
    pending: str | None = None
    for raw in text.splitlines():
        line = raw if pending is None else pending + raw.lstrip()
        body = line.rstrip()
        trailing = len(body) - len(body.rstrip("\\"))
        if trailing % 2 == 1 and not (pending is None and body.lstrip()[:1] in ("#", "!")):
            pending = body[:-1]
            continue
        pending = None
        lines.append(line)
    if pending is not None:
        lines.append(pending)
    return lines


def parse_overrides(pairs: Iterable[str]) -> dict[str, str]:
    """Parse ``key=value`` command-line overrides."""
    result: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set expects key=value, got {pair!r}")
        result[key.strip()] = value
    return result


@dataclass(frozen=True)
class BrokerConfig:
    """Resolved broker settings, keyed by Kafka property name (see PROPERTIES)."""

    values: Mapping[str, object] = field(default_factory=dict)
    explicit: frozenset[str] = frozenset()

    #: Kafka broker properties that were set but are not used by oncelog -> why (``kafka_properties.NOT_USED``).
    not_used: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_sources(cls, *sources: Mapping[str, str]) -> BrokerConfig:
        """Defaults, then each source in turn (later wins), Kafka's aliases applied (``kafka_properties``). A Kafka
        property oncelog does not use is kept in ``not_used``; a name Kafka does not have raises ConfigError."""
        merged: dict[str, str] = {}
        for source in sources:
            merged.update(source)
        try:
            merged = resolve_aliases(merged)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        controller_listeners = merged.get("controller.listener.names", "").split(",")
        for name in ("listeners", "advertised.listeners"):
            if name in merged:
                merged[name] = drop_listeners(merged[name], controller_listeners)
        values: dict[str, object] = {name: spec.default for name, spec in PROPERTIES.items()}
        explicit: set[str] = set()
        not_used: dict[str, str] = {}
        for name, raw in merged.items():
            spec = PROPERTIES.get(name)
            if spec is not None:
                values[name] = parse_value(spec, raw)
            elif is_listener_property(name):
                values[name] = raw.strip()
            elif (reason := not_used_reason(name)) is not None:
                not_used[name] = reason
                continue
            else:
                raise ConfigError(f"unknown property {name!r}{suggestion(name, known_property_names())}")
            explicit.add(name)
        config = cls(values, frozenset(explicit), not_used)
        config.validate()
        return config

    def not_used_summary(self) -> str:
        """The properties of ``not_used``, one group per reason: ``a, b (reason); c (reason)``; empty when none."""
        groups: dict[str, list[str]] = {}
        for name, reason in self.not_used.items():
            groups.setdefault(reason, []).append(name)
        return "; ".join(f"{', '.join(sorted(names))} ({reason})" for reason, names in groups.items())

    def __getitem__(self, name: str) -> object:
        return self.values[name]

    def get_int(self, name: str) -> int:
        value = self.values[name]
        assert isinstance(value, int)
        return value

    def get_bool(self, name: str) -> bool:
        return bool(self.values[name])

    def get_str(self, name: str) -> str:
        return str(self.values[name])

    def get_optional(self, name: str) -> str | None:
        """A per-listener property's text, or None when it is not set."""
        value = self.values.get(name)
        return None if value is None else str(value)

    def for_listener(self, prefix: str) -> BrokerConfig:
        """This config as one listener sees it: each ``<prefix><name>`` set (``prefix`` is the listener's
        ``listener.name.<listener>.``) replaces ``<name>``, as Kafka's ``valuesWithPrefixOverride``. Raises
        ConfigError for a value the property does not accept."""
        values = dict(self.values)
        for name, raw in self.values.items():
            spec = PROPERTIES.get(name[len(prefix) :]) if name.startswith(prefix) else None
            if spec is not None:
                values[spec.name] = parse_value(spec, str(raw), name)
        return dataclasses.replace(self, values=values)

    def with_values(self, **overrides: object) -> BrokerConfig:
        """A copy with some properties replaced (keys use underscores for dots)."""
        values = dict(self.values)
        explicit = set(self.explicit)
        for key, value in overrides.items():
            name = key.replace("_", ".")
            values[name] = value
            explicit.add(name)
        return dataclasses.replace(self, values=values, explicit=frozenset(explicit))

    def validate(self) -> None:
        if len(list_items(self.get_str("log.dirs"))) > 1:
            raise ConfigError(f"log.dirs: oncelog keeps its logs in one directory, got {self.get_str('log.dirs')!r}")
        if self.get_int("num.partitions") < 1:
            raise ConfigError("num.partitions must be at least 1")
        if self.get_int("log.segment.bytes") < 14:
            raise ConfigError("log.segment.bytes must be at least 14")
        if self.get_int("log.flush.interval.messages") < 1:
            raise ConfigError("log.flush.interval.messages must be at least 1")
        queued = self.get_int("queued.max.request.bytes")
        if queued == 0 or queued < -1:
            raise ConfigError("queued.max.request.bytes must be positive, or -1 (unbounded)")
        if self.get_int("fetch.max.bytes") < 0:
            raise ConfigError("fetch.max.bytes must be at least 0")
        try:
            parse_levels(self.get_str("delay.levels"))
        except ValueError as exc:
            raise ConfigError(f"delay.levels: {exc}") from None
        for name in ("delay.topic.num.partitions", "delay.max.buffered.records"):
            if self.get_int(name) < 1:
                raise ConfigError(f"{name} must be at least 1")

    def log_config(self, topic_overrides: Mapping[str, str] | None = None) -> LogConfig:
        """The storage settings of a topic: broker defaults with the topic's own overrides applied."""
        values = dict(self.values)
        for topic_name, raw in (topic_overrides or {}).items():
            broker_name = TOPIC_PROPERTIES.get(topic_name)
            if broker_name is not None:
                values[broker_name] = parse_value(PROPERTIES[broker_name], raw)
        return LogConfig(
            segment_bytes=int(values["log.segment.bytes"]),  # type: ignore[arg-type]
            segment_ms=int(values["log.roll.ms"]),  # type: ignore[arg-type]
            index_interval_bytes=int(values["log.index.interval.bytes"]),  # type: ignore[arg-type]
            max_index_size=int(values["log.index.size.max.bytes"]),  # type: ignore[arg-type]
            retention_ms=int(values["log.retention.ms"]),  # type: ignore[arg-type]
            retention_bytes=int(values["log.retention.bytes"]),  # type: ignore[arg-type]
            max_message_bytes=int(values["message.max.bytes"]),  # type: ignore[arg-type]
            producer_id_expiration_ms=int(values["producer.id.expiration.ms"]),  # type: ignore[arg-type]
            file_delete_delay_ms=int(values["file.delete.delay.ms"]),  # type: ignore[arg-type]
            cleanup_policy=list_items(str(values["log.cleanup.policy"])),
            delete_retention_ms=int(values["log.cleaner.delete.retention.ms"]),  # type: ignore[arg-type]
            message_timestamp_type=str(values["log.message.timestamp.type"]),
            message_timestamp_before_max_ms=int(values["log.message.timestamp.before.max.ms"]),  # type: ignore[arg-type]
            message_timestamp_after_max_ms=int(values["log.message.timestamp.after.max.ms"]),  # type: ignore[arg-type]
            min_insync_replicas=int(values["min.insync.replicas"]),  # type: ignore[arg-type]
            compression_type=str(values["compression.type"]),
            flush_messages=int(values["log.flush.interval.messages"]),  # type: ignore[arg-type]
            flush_ms=int(values["log.flush.interval.ms"]),  # type: ignore[arg-type]
            max_compaction_lag_ms=int(values["log.cleaner.max.compaction.lag.ms"]),  # type: ignore[arg-type]
        )


def is_list_config(topic_name: str) -> bool:
    """Whether a topic-level config is a comma-separated list (Kafka's LIST type), e.g. cleanup.policy."""
    broker_name = TOPIC_PROPERTIES.get(topic_name)
    return broker_name is not None and PROPERTIES[broker_name].list_items is not None


def topic_config_problem(name: str, raw: str | None) -> str | None:
    """Why ``raw`` is not a valid value of the topic config ``name`` (Kafka's LogConfig message), or None."""
    broker_name = TOPIC_PROPERTIES.get(name)
    if broker_name is None:
        return f"Unknown topic config name: {name}"
    if raw is None:
        return f"Null value not supported for topic configs: {name}"
    spec = PROPERTIES[broker_name]
    try:
        value = parse_value(spec, raw, name)
    except ConfigError as exc:
        return str(exc)
    if spec.topic_minimum is not None and isinstance(value, int) and value < spec.topic_minimum:
        return f"Invalid value {raw} for configuration {name}: Value must be at least {spec.topic_minimum}"
    return None


def validate_topic_configs(configs: Mapping[str, str | None]) -> str | None:
    """Return an error message when a topic config (CreateTopics, AlterConfigs) is unknown or invalid, else None."""
    for name, raw in configs.items():
        problem = topic_config_problem(name, raw)
        if problem is not None:
            return problem
    return None
