"""Kafka's group configs (KIP-848's GROUP config resource, type 32): per-group overrides of the consumer group
session timeout and heartbeat interval, checked as Kafka's GroupConfig checks them and kept in the data dir.

Guarantees: ``changed`` returns a group's new override set or raises ConfigChangeError with Kafka's code and message
(INVALID_REQUEST for the resource, INVALID_CONFIG for names and values); ``store`` replaces ``group-configs.json``
atomically and fsynced before the set is used. The values only concern KIP-848 (``consumer`` protocol) groups, as in
Kafka; oncelog's classic groups keep the session timeout each member asks for. Share-group configs are not known
(there are no share groups).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from oncelog.broker.config import PROPERTIES, BrokerConfig, ConfigError, parse_value
from oncelog.broker.topic_configs import ConfigChangeError, ConfigOp, apply_ops, check_entries
from oncelog.protocol import ErrorCode
from oncelog.storage.checkpoint import atomic_write

#: The file in the data dir holding every group's overrides: {group id: {name: value}}.
GROUP_CONFIGS_FILE = "group-configs.json"
CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"


@dataclass(frozen=True)
class GroupConfigSpec:
    """One group config: its broker default property and the broker properties bounding it (GroupConfig)."""

    name: str
    default: str
    minimum: str
    maximum: str
    doc: str


#: Kafka's GroupConfig definitions that apply to consumer groups, by name.
GROUP_CONFIGS: dict[str, GroupConfigSpec] = {
    spec.name: spec
    for spec in (
        GroupConfigSpec(
            CONSUMER_SESSION_TIMEOUT_MS,
            "group.consumer.session.timeout.ms",
            "group.consumer.min.session.timeout.ms",
            "group.consumer.max.session.timeout.ms",
            "The timeout to detect client failures when using the consumer group protocol.",
        ),
        GroupConfigSpec(
            CONSUMER_HEARTBEAT_INTERVAL_MS,
            "group.consumer.heartbeat.interval.ms",
            "group.consumer.min.heartbeat.interval.ms",
            "group.consumer.max.heartbeat.interval.ms",
            "The heartbeat interval given to the members of a consumer group.",
        ),
    )
}


def check_group_configs(configs: Mapping[str, str], broker: BrokerConfig) -> None:
    """Kafka's GroupConfig.validate: known names, INT values of at least 1 within the broker's bounds."""
    for name in configs:
        if name not in GROUP_CONFIGS:
            raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
    for name, raw in configs.items():
        spec = GROUP_CONFIGS[name]
        try:
            value = parse_value(PROPERTIES[spec.default], raw, name)
        except ConfigError as exc:
            raise ConfigChangeError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        assert isinstance(value, int)
        if value < 1:
            raise ConfigChangeError(
                ErrorCode.INVALID_CONFIG, f"Invalid value {raw} for configuration {name}: Value must be at least 1"
            )
        if value < broker.get_int(spec.minimum):
            raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"{name} must be greater than or equal to {spec.minimum}")
        if value > broker.get_int(spec.maximum):
            raise ConfigChangeError(ErrorCode.INVALID_CONFIG, f"{name} must be less than or equal to {spec.maximum}")


class GroupConfigs:
    """Every group's config overrides, persisted in the data dir."""

    def __init__(self, data_dir: Path) -> None:
        self._path = Path(data_dir) / GROUP_CONFIGS_FILE
        self._groups: dict[str, dict[str, str]] = {}
        if self._path.exists():
            raw = json.loads(self._path.read_text())
            self._groups = {str(g): {str(k): str(v) for k, v in c.items()} for g, c in raw.items()}

    def of(self, group_id: str) -> dict[str, str]:
        """The group's overrides (empty when it has none)."""
        return dict(self._groups.get(group_id, {}))

    def changed(
        self, group_id: str, ops: Sequence[ConfigOp], broker: BrokerConfig, *, incremental: bool
    ) -> dict[str, str]:
        """The override set ``ops`` give the group (AlterConfigs replaces it); raises ConfigChangeError."""
        if not group_id:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Default group resources are not allowed.")
        check_entries(ops)
        new = apply_ops(self.of(group_id) if incremental else {}, ops, is_list=lambda _name: False)
        check_group_configs(new, broker)
        return new

    def store(self, group_id: str, configs: Mapping[str, str]) -> None:
        """Make ``configs`` the group's overrides, on disk (atomic, fsynced) then here; OSError changes nothing."""
        groups = {**self._groups, group_id: dict(configs)}
        if not configs:
            del groups[group_id]
        atomic_write(self._path, json.dumps(groups, indent=1, sort_keys=True).encode())
        self._groups = groups

    def value(self, group_id: str, name: str, broker: BrokerConfig) -> tuple[str, bool]:
        """The group's value of config ``name`` and whether the group sets it (else the broker default's)."""
        own = self._groups.get(group_id, {})
        if name in own:
            return own[name], True
        return str(broker[GROUP_CONFIGS[name].default]), False
