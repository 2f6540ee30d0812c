"""Kafka's dynamic broker configs (DynamicBrokerConfig): which broker properties AlterConfigs and
IncrementalAlterConfigs may change at runtime, for the whole cluster (BROKER resource "") or for this broker (its node
id), how a change is checked, where it is kept and the effective config it gives.

Guarantees: a change is checked as Kafka's ConfigAdminManager checks it (every refusal INVALID_REQUEST with Kafka's
ConfigException message) before anything is written; ``store`` replaces ``dynamic-broker-configs.json`` in the data
dir atomically and fsynced, so after a crash the file holds the old or the new set; ``effective`` applies them with
Kafka's precedence (this broker's over the cluster default over the static properties) to the properties oncelog
reads. Dynamic configs oncelog does not read (thread pools, SASL/Kerberos, per-listener TLS stores) are accepted,
kept and described, as Kafka keeps them, without effect.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

from oncelog.broker.config import PROPERTIES, BrokerConfig, ConfigError, known_property_names, parse_value
from oncelog.broker.kafka_properties import ALIASES
from oncelog.broker.topic_configs import ConfigChangeError, ConfigOp, OpType, apply_ops, check_entries
from oncelog.protocol import ErrorCode
from oncelog.storage.checkpoint import atomic_write

#: The file in the data dir holding the dynamic configs: {"cluster": {...}, "broker": {...}}.
DYNAMIC_CONFIGS_FILE = "dynamic-broker-configs.json"
#: The BROKER resource name of the cluster-wide defaults.
CLUSTER_DEFAULT = ""


def _names(text: str) -> frozenset[str]:
    return frozenset(text.split())


#: Kafka's SslConfigs.RECONFIGURABLE_CONFIGS (DynamicSecurityConfigs): dynamic per listener only.
SECURITY_CONFIGS = _names(
    """ssl.keystore.type ssl.keystore.location ssl.keystore.password ssl.key.password ssl.truststore.type
    ssl.truststore.location ssl.truststore.password ssl.keystore.certificate.chain ssl.keystore.key
    ssl.truststore.certificates"""
)
#: Kafka's DynamicListenerConfig.ReconfigurableConfigs.
LISTENER_CONFIGS = _names(
    """advertised.listeners listeners listener.security.protocol.map principal.builder.class ssl.protocol
    ssl.provider ssl.cipher.suites ssl.enabled.protocols ssl.keystore.type ssl.keystore.location ssl.keystore.password
    ssl.key.password ssl.truststore.type ssl.truststore.location ssl.truststore.password ssl.keymanager.algorithm
    ssl.trustmanager.algorithm ssl.endpoint.identification.algorithm ssl.secure.random.implementation
    ssl.client.auth ssl.engine.factory.class sasl.mechanism.inter.broker.protocol sasl.jaas.config
    sasl.enabled.mechanisms sasl.kerberos.service.name sasl.kerberos.kinit.cmd sasl.kerberos.ticket.renew.window.factor
    sasl.kerberos.ticket.renew.jitter sasl.kerberos.min.time.before.relogin sasl.kerberos.principal.to.local.rules
    sasl.login.refresh.window.factor sasl.login.refresh.window.jitter sasl.login.refresh.min.period.seconds
    sasl.login.refresh.buffer.seconds max.connections max.connection.creation.rate num.network.threads"""
)
#: Kafka's ClusterLevelListenerConfigs: listener configs that may also be cluster-wide.
_CLUSTER_LEVEL_LISTENER_CONFIGS = _names("max.connections max.connection.creation.rate num.network.threads")
#: Configs that only a broker's own resource may set (Kafka's PerBrokerConfigs).
PER_BROKER_CONFIGS = (SECURITY_CONFIGS | LISTENER_CONFIGS) - _CLUSTER_LEVEL_LISTENER_CONFIGS
#: Kafka's DynamicLogConfig.ReconfigurableConfigs: the broker synonym of every topic config but message.format.version.
LOG_CONFIGS = _names(
    """log.segment.bytes log.roll.ms log.roll.jitter.ms log.index.size.max.bytes log.flush.interval.messages
    log.flush.interval.ms log.retention.bytes log.retention.ms message.max.bytes log.index.interval.bytes
    log.cleaner.delete.retention.ms log.cleaner.min.compaction.lag.ms log.cleaner.max.compaction.lag.ms
    log.segment.delete.delay.ms log.cleaner.min.cleanable.ratio log.cleanup.policy unclean.leader.election.enable
    min.insync.replicas compression.type compression.gzip.level compression.lz4.level compression.zstd.level
    log.preallocate log.message.timestamp.type log.message.timestamp.difference.max.ms
    log.message.timestamp.before.max.ms log.message.timestamp.after.max.ms log.message.downconversion.enable
    log.local.retention.ms log.local.retention.bytes"""
)
#: Kafka's DynamicBrokerConfig.AllDynamicConfigs.
DYNAMIC_BROKER_CONFIGS = (
    SECURITY_CONFIGS
    | LOG_CONFIGS
    | LISTENER_CONFIGS
    | _names(
        """log.cleaner.threads log.cleaner.dedupe.buffer.size log.cleaner.io.buffer.load.factor
        log.cleaner.io.buffer.size log.cleaner.io.max.bytes.per.second log.cleaner.backoff.ms
        num.io.threads num.replica.fetchers num.recovery.threads.per.data.dir background.threads metric.reporters
        max.connections.per.ip max.connections.per.ip.overrides producer.id.expiration.ms
        transaction.partition.verification.enable remote.log.index.file.cache.total.size.bytes
        remote.fetch.max.wait.ms remote.log.manager.copy.max.bytes.per.second
        remote.log.manager.fetch.max.bytes.per.second remote.list.offsets.request.timeout.ms"""
    )
)
#: The dynamic configs of Kafka's PASSWORD type (matched as name suffixes, listener prefixes included).
_PASSWORD_CONFIGS = (
    "ssl.keystore.password",
    "ssl.key.password",
    "ssl.truststore.password",
    "ssl.keystore.certificate.chain",
    "ssl.keystore.key",
    "ssl.truststore.certificates",
    "sasl.jaas.config",
)
_LISTENER_CONFIG = re.compile(r"listener\.name\.[^.]*\.(.*)")
#: Kafka's broker name -> the oncelog property it sets, where the two differ (``kafka_properties.ALIASES``).
_TARGETS: dict[str, str] = {name: alias.target for alias in ALIASES for name, _factor in alias.names}


def is_dynamic(name: str) -> bool:
    """Whether Kafka lets AlterConfigs change broker config ``name`` (its read_only is false in DescribeConfigs)."""
    return name in DYNAMIC_BROKER_CONFIGS


def is_password_config(name: str) -> bool:
    """Kafka's DynamicBrokerConfig.isPasswordConfig: a secret, whose value is never described."""
    return name.endswith(_PASSWORD_CONFIGS)


def _scala_set(names: Sequence[str]) -> str:
    return f"Set({', '.join(sorted(names))})"


def _refuse(message: str, names: Sequence[str]) -> None:
    if names:
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"{message}: {_scala_set(names)}")


def applied_property(name: str) -> str | None:
    """The oncelog property a dynamic config sets, or None when oncelog does not read it (kept and described only).
    Per-broker listener and security configs take effect at the next start only through the static properties."""
    target = _TARGETS.get(name, name)
    if name not in DYNAMIC_BROKER_CONFIGS or name in PER_BROKER_CONFIGS or target not in PROPERTIES:
        return None
    return target


def check_configs(configs: Mapping[str, str], per_broker: bool) -> None:
    """Kafka's DynamicBrokerConfig.validateConfigs, then the values' types; raises ConfigChangeError."""
    known = known_property_names()
    _refuse(
        "Cannot update these configs dynamically",
        [n for n in configs if n in known and n not in DYNAMIC_BROKER_CONFIGS],
    )
    _refuse(
        "These security configs can be dynamically updated only per-listener using the listener prefix",
        [n for n in configs if n in SECURITY_CONFIGS],
    )
    for name, raw in configs.items():
        target = applied_property(name)
        if target is not None:
            try:
                parse_value(PROPERTIES[target], raw, name)
            except ConfigError as exc:
                raise ConfigChangeError(ErrorCode.INVALID_REQUEST, str(exc)) from None
    if not per_broker:

        def per_broker_only(name: str) -> bool:
            listener = _LISTENER_CONFIG.fullmatch(name)
            if listener is not None:
                return listener.group(1) not in _CLUSTER_LEVEL_LISTENER_CONFIGS
            return name in PER_BROKER_CONFIGS

        _refuse(
            "Cannot update these configs at default cluster level, broker id must be specified",
            [n for n in configs if per_broker_only(n)],
        )


class DynamicBrokerConfigs:
    """The dynamic configs of this broker: the cluster-wide defaults and its own, persisted in the data dir."""

    def __init__(self, data_dir: Path) -> None:
        self._path = Path(data_dir) / DYNAMIC_CONFIGS_FILE
        self.cluster: dict[str, str] = {}
        self.broker: dict[str, str] = {}
        if self._path.exists():
            raw = json.loads(self._path.read_text())
            self.cluster = {str(k): str(v) for k, v in raw.get("cluster", {}).items()}
            self.broker = {str(k): str(v) for k, v in raw.get("broker", {}).items()}

    def of(self, per_broker: bool) -> dict[str, str]:
        return self.broker if per_broker else self.cluster

    def changed(self, per_broker: bool, ops: Sequence[ConfigOp], *, incremental: bool) -> dict[str, str]:
        """The set ``ops`` make of the resource's current one (AlterConfigs replaces it); raises ConfigChangeError."""
        check_entries(ops)
        for op in ops:  # Kafka's ConfigAdminManager.prepareIncrementalConfigs
            if op.op in (OpType.APPEND, OpType.SUBTRACT):
                if op.name not in known_property_names():
                    raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"Unknown config name: {op.name}")
                if not _is_list(op.name):
                    raise ConfigChangeError(
                        ErrorCode.INVALID_CONFIG,
                        f"Config value {OpType(op.op).name.lower()} is not allowed for config key: {op.name}",
                    )
        new = apply_ops(self.of(per_broker) if incremental else {}, ops, is_list=_is_list, list_default=_list_default)
        check_configs(new, per_broker)
        return new

    def effective(self, static: BrokerConfig, cluster: Mapping[str, str], broker: Mapping[str, str]) -> BrokerConfig:
        """``static`` with ``cluster`` then ``broker`` applied to the properties oncelog reads; raises
        ConfigChangeError when the result is not a valid config (BrokerConfig.validate)."""
        values = dict(static.values)
        for configs in (cluster, broker):
            for name, raw in configs.items():
                target = applied_property(name)
                if target is not None:
                    values[target] = parse_value(PROPERTIES[target], raw, name)
        config = BrokerConfig(values, static.explicit, static.not_used)
        try:
            config.validate()
        except ConfigError as exc:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, str(exc)) from None
        return config

    def store(self, per_broker: bool, configs: Mapping[str, str]) -> None:
        """Replace the resource's set, on disk (atomic, fsynced) and then here; OSError leaves both unchanged."""
        cluster, broker = (self.cluster, dict(configs)) if per_broker else (dict(configs), self.broker)
        atomic_write(self._path, json.dumps({"cluster": cluster, "broker": broker}, indent=1, sort_keys=True).encode())
        self.cluster, self.broker = cluster, broker


def _is_list(name: str) -> bool:
    target = applied_property(name)
    return target is not None and PROPERTIES[target].list_items is not None


def _list_default(name: str) -> str:
    target = applied_property(name)
    return str(PROPERTIES[target].default) if target is not None else ""
