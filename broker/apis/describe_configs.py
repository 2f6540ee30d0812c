"""DescribeConfigs (32) for topics (overrides over broker values), for groups (KIP-848 group configs), for this
broker (every property, its dynamic configs first) and for the cluster default (BROKER "": the dynamic defaults
alone), as Kafka's ConfigHelper."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from oncelog.broker.config import PROPERTIES, PropertySpec
from oncelog.broker.dynamic_config import applied_property, is_dynamic, is_password_config
from oncelog.broker.group_configs import GROUP_CONFIGS
from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: Kafka's ConfigResource.Type.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_GROUP = 32
#: Kafka's DescribeConfigsResponse.ConfigSource.
SOURCE_DYNAMIC_TOPIC_CONFIG = 1
SOURCE_DYNAMIC_BROKER_CONFIG = 2
SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = 3
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5
SOURCE_GROUP_CONFIG = 8
#: Kafka's DescribeConfigsResponse.ConfigType.
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_PASSWORD = 1, 2, 3, 5, 9


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _config_type(spec: PropertySpec) -> int:
    if spec.sensitive:
        return TYPE_PASSWORD
    return {bool: TYPE_BOOLEAN, int: TYPE_LONG}.get(spec.kind, TYPE_STRING)


def _dynamic_by_property(configs: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Dynamic configs by the oncelog property they set (their own name when none): (Kafka name, value)."""
    return {applied_property(name) or name: (name, value) for name, value in configs.items()}


def _broker_synonyms(broker: Broker, spec: PropertySpec, per_broker: bool = True) -> list[dict]:
    """Every value the broker property has, highest precedence first (Kafka's ConfigHelper.configSynonyms): this
    broker's dynamic config, the cluster's dynamic default, the static config, the default; only the dynamic
    default for the cluster resource (``per_broker`` false)."""
    dynamic = broker.dynamic_configs
    synonyms = []
    layers = [(dynamic.cluster, SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)]
    if per_broker:
        layers.insert(0, (dynamic.broker, SOURCE_DYNAMIC_BROKER_CONFIG))
    for configs, source in layers:
        found = _dynamic_by_property(configs).get(spec.name)
        if found is not None:
            synonyms.append({"name": found[0], "value": None if spec.sensitive else found[1], "source": source})
    if per_broker:
        if spec.name in broker.static_config.explicit:
            value = None if spec.sensitive else _text(broker.static_config[spec.name])
            synonyms.append({"name": spec.name, "value": value, "source": SOURCE_STATIC_BROKER_CONFIG})
        value = None if spec.sensitive else _text(spec.default)
        synonyms.append({"name": spec.name, "value": value, "source": SOURCE_DEFAULT_CONFIG})
    return synonyms


def _entry(
    name: str, value: str | None, source: int, spec: PropertySpec, read_only: bool, synonyms: list[dict]
) -> dict:
    """One config entry; a sensitive one has no value, as Kafka sends none for a PASSWORD config."""
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "is_default": source == SOURCE_DEFAULT_CONFIG,
        "config_source": source,
        "is_sensitive": spec.sensitive,
        "synonyms": synonyms,
        "config_type": _config_type(spec),
        "documentation": spec.doc,
    }


def topic_config_entries(broker: Broker, overrides: Mapping[str, str]) -> list[dict]:
    """Every topic-level config: the topic's override, else the broker's value (with synonyms)."""
    entries = []
    for spec in PROPERTIES.values():
        if spec.topic_name is None:
            continue
        synonyms = _broker_synonyms(broker, spec)
        if spec.topic_name in overrides:
            value, source = overrides[spec.topic_name], SOURCE_DYNAMIC_TOPIC_CONFIG
            synonyms.insert(0, {"name": spec.topic_name, "value": value, "source": source})
        else:
            value, source = _text(broker.config[spec.name]), synonyms[0]["source"]
        entries.append(_entry(spec.topic_name, value, source, spec, False, synonyms))
    return entries


def _broker_entries(broker: Broker, per_broker: bool) -> list[dict]:
    """This broker's configs (``per_broker``), or the cluster's dynamic defaults alone (Kafka's answer for "")."""
    entries = []
    described = set()
    for spec in PROPERTIES.values():
        synonyms = _broker_synonyms(broker, spec, per_broker)
        if not synonyms:
            continue
        described.add(spec.name)
        value = synonyms[0]["value"]  # the highest-precedence value (None for a secret), as Kafka describes it
        entries.append(_entry(spec.name, value, synonyms[0]["source"], spec, not is_dynamic(spec.name), synonyms))
    # Dynamic configs oncelog does not read (thread pools, SASL, per-listener stores): kept and described as set.
    layers = [(broker.dynamic_configs.cluster, SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG)]
    if per_broker:
        layers.insert(0, (broker.dynamic_configs.broker, SOURCE_DYNAMIC_BROKER_CONFIG))
    for configs, source in layers:
        for name, value in sorted(configs.items()):
            if name in described or applied_property(name) in described:
                continue
            described.add(name)
            spec = PropertySpec(name, str, "", "", sensitive=is_password_config(name))
            shown = None if spec.sensitive else value
            synonyms = [{"name": name, "value": shown, "source": source}]
            entries.append(_entry(name, shown, source, spec, False, synonyms))
    return entries


def _group_entries(broker: Broker, group_id: str) -> list[dict]:
    """A group's configs (Kafka's ConfigHelper.createGroupConfigEntry): its override, else the broker default."""
    entries = []
    for name, spec in GROUP_CONFIGS.items():
        value, own = broker.group_configs.value(group_id, name, broker.config)
        source = SOURCE_GROUP_CONFIG if own else SOURCE_DEFAULT_CONFIG
        entry = _entry(name, value, source, PROPERTIES[spec.default], False, [])
        entry.update(
            config_type=TYPE_INT, documentation=spec.doc, synonyms=[{"name": name, "value": value, "source": source}]
        )
        entries.append(entry)
    return entries


def _describe(broker: Broker, resource, include_synonyms: bool) -> dict:
    result = {
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "resource_type": resource.resource_type,
        "resource_name": resource.resource_name,
        "configs": [],
    }
    if resource.resource_type == RESOURCE_TOPIC:
        topic = broker.metadata.get(resource.resource_name)
        if topic is None:
            result["error_code"] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            result["error_message"] = f"Topic {resource.resource_name} does not exist"
            return result
        entries = topic_config_entries(broker, topic.configs)
    elif resource.resource_type == RESOURCE_BROKER:
        if resource.resource_name not in ("", str(broker.node_id)):
            result["error_code"] = ErrorCode.INVALID_REQUEST
            result["error_message"] = (
                f"Unexpected broker id, expected {broker.node_id} or empty string, but received "
                f"{resource.resource_name}"
            )
            return result
        entries = _broker_entries(broker, per_broker=resource.resource_name != "")
    elif resource.resource_type == RESOURCE_GROUP:
        if not resource.resource_name:
            result["error_code"] = ErrorCode.INVALID_REQUEST
            result["error_message"] = "Group name must not be empty"
            return result
        entries = _group_entries(broker, resource.resource_name)
    else:
        result["error_code"] = ErrorCode.INVALID_REQUEST
        result["error_message"] = f"Unsupported resource type {resource.resource_type}"
        return result
    keys = resource.configuration_keys
    if keys is not None:
        entries = [e for e in entries if e["name"] in set(keys)]
    if not include_synonyms:
        for entry in entries:
            entry["synonyms"] = []
    result["configs"] = entries
    return result


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    return {
        "throttle_time_ms": 0,
        "results": [_describe(broker, r, body.include_synonyms) for r in body.resources],
    }
