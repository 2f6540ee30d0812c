"""AlterConfigs (33): replace a topic's whole override set. Also the resource handling IncrementalAlterConfigs shares.

BROKER resources: Kafka's dynamic broker configs (``broker.dynamic_config``), cluster-wide ("") or for this broker
(its node id); a config Kafka cannot update at runtime is INVALID_REQUEST ("Cannot update these configs dynamically:
..."). GROUP resources: a group's configs (``broker.group_configs``). Other resource types are INVALID_REQUEST. A
resource named twice is INVALID_REQUEST for each copy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from oncelog.broker.apis.describe_configs import RESOURCE_BROKER, RESOURCE_GROUP, RESOURCE_TOPIC
from oncelog.broker.dynamic_config import CLUSTER_DEFAULT
from oncelog.broker.request import Request
from oncelog.broker.topic_configs import ConfigChangeError, ConfigOp, OpType
from oncelog.broker.topics import TopicOutcome
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


def _alter_broker(
    broker: Broker, name: str, ops: Sequence[ConfigOp], *, incremental: bool, validate_only: bool
) -> TopicOutcome:
    """Kafka's checks of a BROKER resource (ConfigAdminManager), then the change of the dynamic configs of this
    broker (its node id) or of the cluster default (""), persisted and applied unless ``validate_only``."""
    if name:
        if not name.lstrip("-").isdigit():
            return TopicOutcome(ErrorCode.INVALID_REQUEST, f"Node id must be an integer, but it is: {name}")
        if int(name) != broker.node_id:
            return TopicOutcome(
                ErrorCode.INVALID_REQUEST, f"Unexpected broker id, expected {broker.node_id}, but received {name}"
            )
    per_broker = name != CLUSTER_DEFAULT
    dynamic = broker.dynamic_configs
    try:
        configs = dynamic.changed(per_broker, ops, incremental=incremental)
        if validate_only:
            cluster, own = (dynamic.cluster, configs) if per_broker else (configs, dynamic.broker)
            dynamic.effective(broker.static_config, cluster, own)
        elif configs != dynamic.of(per_broker):
            broker.alter_dynamic_configs(per_broker, configs)
    except ConfigChangeError as exc:
        return TopicOutcome(exc.code, exc.message)
    except OSError as exc:
        return TopicOutcome(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot save the dynamic broker configs: {exc}")
    return TopicOutcome(ErrorCode.NONE)


def _alter_group(
    broker: Broker, group_id: str, ops: Sequence[ConfigOp], *, incremental: bool, validate_only: bool
) -> TopicOutcome:
    """A GROUP resource (KIP-848): the group's config overrides, persisted unless ``validate_only``. The group need
    not exist, as in Kafka."""
    configs = broker.group_configs
    try:
        new = configs.changed(group_id, ops, broker.config, incremental=incremental)
        if not validate_only and new != configs.of(group_id):
            configs.store(group_id, new)
    except ConfigChangeError as exc:
        return TopicOutcome(exc.code, exc.message)
    except OSError as exc:
        return TopicOutcome(ErrorCode.KAFKA_STORAGE_ERROR, f"Cannot save the configs of group {group_id}: {exc}")
    return TopicOutcome(ErrorCode.NONE)


async def alter_resources(
    broker: Broker,
    resources: Sequence,
    ops_of: Callable[[object], list[ConfigOp]],
    *,
    incremental: bool,
    validate_only: bool,
) -> list[dict]:
    """One response entry per requested resource, in request order; ``ops_of`` reads a resource's entries."""
    counts = Counter((r.resource_type, r.resource_name) for r in resources)
    responses = []
    for resource in resources:
        if counts[(resource.resource_type, resource.resource_name)] > 1:
            outcome = TopicOutcome(ErrorCode.INVALID_REQUEST, "Each resource must appear at most once.")
        elif resource.resource_type == RESOURCE_TOPIC:
            outcome = await broker.topics.alter_configs(
                resource.resource_name, ops_of(resource), incremental=incremental, validate_only=validate_only
            )
        elif resource.resource_type == RESOURCE_BROKER:
            outcome = _alter_broker(
                broker, resource.resource_name, ops_of(resource), incremental=incremental, validate_only=validate_only
            )
        elif resource.resource_type == RESOURCE_GROUP:
            outcome = _alter_group(
                broker, resource.resource_name, ops_of(resource), incremental=incremental, validate_only=validate_only
            )
        else:
            outcome = TopicOutcome(ErrorCode.INVALID_REQUEST, f"Unsupported resource type {resource.resource_type}")
        responses.append(
            {
                "error_code": outcome.error,
                "error_message": outcome.message,
                "resource_type": resource.resource_type,
                "resource_name": resource.resource_name,
            }
        )
    return responses


def _sets(resource) -> list[ConfigOp]:
    return [ConfigOp(c.name, OpType.SET, c.value) for c in resource.configs]


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    responses = await alter_resources(
        broker, body.resources, _sets, incremental=False, validate_only=body.validate_only
    )
    return {"throttle_time_ms": 0, "responses": responses}
