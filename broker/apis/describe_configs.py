"""DescribeConfigs (32) for topics (overrides over broker values) and for this broker."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from oncelog.broker.config import PROPERTIES, PropertySpec
from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: Kafka's ConfigResource.Type.
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
#: Kafka's DescribeConfigsResponse.ConfigSource.
SOURCE_DYNAMIC_TOPIC_CONFIG = 1
SOURCE_STATIC_BROKER_CONFIG = 4
SOURCE_DEFAULT_CONFIG = 5
#: Kafka's DescribeConfigsResponse.ConfigType.
TYPE_BOOLEAN, TYPE_STRING, TYPE_LONG, TYPE_PASSWORD = 1, 2, 5, 9


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


def _config_type(spec: PropertySpec) -> int:
    if spec.sensitive:
        return TYPE_PASSWORD
    return {bool: TYPE_BOOLEAN, int: TYPE_LONG}.get(spec.kind, TYPE_STRING)


def _broker_source(broker: Broker, spec: PropertySpec) -> int:
    return SOURCE_STATIC_BROKER_CONFIG if spec.name in broker.config.explicit else SOURCE_DEFAULT_CONFIG


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
        broker_value = _text(broker.config[spec.name])
        broker_source = _broker_source(broker, spec)
        synonyms = [{"name": spec.name, "value": broker_value, "source": broker_source}]
        if spec.topic_name in overrides:
            value, source = overrides[spec.topic_name], SOURCE_DYNAMIC_TOPIC_CONFIG
            synonyms.insert(0, {"name": spec.topic_name, "value": value, "source": source})
        else:
            value, source = broker_value, broker_source
        entries.append(_entry(spec.topic_name, value, source, spec, False, synonyms))
    return entries


def _broker_entries(broker: Broker) -> list[dict]:
    entries = []
    for spec in PROPERTIES.values():
        value, source = _text(broker.config[spec.name]), _broker_source(broker, spec)
        if spec.sensitive:
            value = None
        entries.append(
            _entry(spec.name, value, source, spec, True, [{"name": spec.name, "value": value, "source": source}])
        )
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
            result["error_message"] = f"Unexpected broker id, expected {broker.node_id}"
            return result
        entries = _broker_entries(broker)
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
