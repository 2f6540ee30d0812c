"""Kafka's rules for changing a topic's config overrides (AlterConfigs, IncrementalAlterConfigs), as pure functions.

``new_overrides`` turns one resource's request entries into the topic's new override set, or raises
``ConfigChangeError`` with Kafka's error code and message (ConfigAdminManager's request checks, then
ConfigurationControlManager's operations, then LogConfig's validation). Persisting and applying the result is
``TopicManager.alter_configs``'s job.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import IntEnum

from oncelog.broker.config import PROPERTIES, TOPIC_PROPERTIES, is_list_config, list_items, validate_topic_configs
from oncelog.broker.metadata import INTERNAL_TOPIC_CONFIGS
from oncelog.protocol import ErrorCode


class OpType(IntEnum):
    """Kafka's AlterConfigOp.OpType (KIP-339)."""

    SET = 0
    DELETE = 1
    APPEND = 2  # add items to a LIST config (cleanup.policy), each once
    SUBTRACT = 3  # remove items from a LIST config


@dataclass(frozen=True)
class ConfigOp:
    """One entry of a request: AlterConfigs entries are SETs."""

    name: str
    op: int
    value: str | None


class ConfigChangeError(Exception):
    """A change Kafka refuses; ``code`` and the message go into the resource's response."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_entries(ops: Sequence[ConfigOp]) -> None:
    """The checks Kafka's brokers make before any operation (ConfigAdminManager.preprocess): INVALID_REQUEST for a
    key named twice, a null value other than a DELETE's, or an unknown operation."""
    if any(count > 1 for count in Counter(op.name for op in ops).values()):
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Error due to duplicate config keys")
    nulls = [op.name for op in ops if op.value is None and op.op != OpType.DELETE]
    if nulls:
        raise ConfigChangeError(ErrorCode.INVALID_REQUEST, "Null value not supported for : " + ", ".join(nulls))
    for op in ops:
        if op.op not in OpType._value2member_map_:
            raise ConfigChangeError(ErrorCode.INVALID_REQUEST, f"Unknown operations type {op.op}")


def _list_default(name: str) -> str:
    # Kafka starts from the config's schema default (KafkaConfigSchema.getDefault), not the broker's own value.
    return str(PROPERTIES[TOPIC_PROPERTIES[name]].default)


def apply_ops(
    current: Mapping[str, str],
    ops: Sequence[ConfigOp],
    *,
    is_list: Callable[[str], bool] = is_list_config,
    list_default: Callable[[str], str] = _list_default,
) -> dict[str, str]:
    """``current`` with each operation applied in turn (ConfigurationControlManager.incrementalAlterConfigResource).

    APPEND and SUBTRACT work on the comma-separated items of the override, else of ``list_default``; on a config
    that is not a list (``is_list``; default: the topic configs') they raise INVALID_CONFIG.
    """
    result = dict(current)
    for op in ops:
        if op.op == OpType.SET:
            assert op.value is not None  # check_entries
            result[op.name] = op.value
        elif op.op == OpType.DELETE:
            result.pop(op.name, None)
        else:
            kind = OpType(op.op).name
            if not is_list(op.name):
                raise ConfigChangeError(
                    ErrorCode.INVALID_CONFIG, f"Can't {kind} to key {op.name} because its type is not LIST."
                )
            items = list(list_items(result.get(op.name, list_default(op.name))))
            for item in list_items(op.value or ""):
                if op.op == OpType.APPEND and item not in items:
                    items.append(item)
                elif op.op == OpType.SUBTRACT and item in items:
                    items.remove(item)
            result[op.name] = ",".join(items)
    return result


def keep_internal_fixed(topic: str, ops: Sequence[ConfigOp], new: Mapping[str, str]) -> dict[str, str]:
    """``new`` with an internal topic's fixed settings (INTERNAL_TOPIC_CONFIGS) kept. Naming one of them in a way
    that would change it is INVALID_CONFIG (oncelog's rule: the broker applies those values whatever is stored);
    AlterConfigs leaving one out keeps it."""
    fixed = INTERNAL_TOPIC_CONFIGS.get(topic, {})
    named = {op.name for op in ops}
    changed = sorted(name for name, value in fixed.items() if name in named and new.get(name) != value)
    if changed:
        raise ConfigChangeError(
            ErrorCode.INVALID_CONFIG,
            f"Cannot change {', '.join(changed)} of internal topic {topic}: fixed at "
            + ", ".join(f"{name}={fixed[name]}" for name in changed),
        )
    return {**new, **fixed}


def new_overrides(
    topic: str, current: Mapping[str, str], ops: Sequence[ConfigOp], *, incremental: bool
) -> dict[str, str]:
    """The override set topic ``topic`` gets: ``current`` changed by ``ops`` (IncrementalAlterConfigs), or exactly
    the ``ops``' values (AlterConfigs replaces the whole set). Raises ConfigChangeError."""
    check_entries(ops)
    new = apply_ops(current if incremental else {}, ops)
    new = keep_internal_fixed(topic, ops, new)
    problem = validate_topic_configs(new)
    if problem is not None:
        raise ConfigChangeError(ErrorCode.INVALID_CONFIG, problem)
    return new
