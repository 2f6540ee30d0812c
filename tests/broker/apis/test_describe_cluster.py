"""DescribeCluster through the wire: this node as the only broker and controller; KIP-919 endpoint types; the
authorized operations it and Metadata answer (KIP-430)."""

from __future__ import annotations

import pytest
from oncelog.protocol import ApiKey, ErrorCode

from broker.helpers import create_topic_body

NODE = 1  # node.id default
NOT_REQUESTED = -(2**31)


@pytest.mark.parametrize("version", [0, 1])
async def test_lists_this_node_as_metadata_does(broker, client, version: int) -> None:
    body = {"include_cluster_authorized_operations": False, "endpoint_type": 1}
    described = await client.request(ApiKey.DESCRIBE_CLUSTER, version, body)
    metadata = await client.request(ApiKey.METADATA, 9, {"topics": [], "allow_auto_topic_creation": False})
    assert (described.error_code, described.error_message) == (ErrorCode.NONE, None)
    assert described.cluster_id == metadata.cluster_id == broker.node.metadata.cluster_id != ""
    assert described.controller_id == metadata.controller_id == NODE
    assert (
        [(b.broker_id, b.host, b.port, b.rack) for b in described.brokers]
        == [(b.node_id, b.host, b.port, b.rack) for b in metadata.brokers]
        == [(NODE, "127.0.0.1", broker.port, None)]
    )
    assert described.endpoint_type == 1
    assert described.cluster_authorized_operations == NOT_REQUESTED


async def test_authorized_operations_when_asked_are_all_cluster_operations(client) -> None:
    body = {"include_cluster_authorized_operations": True, "endpoint_type": 1}
    described = await client.request(ApiKey.DESCRIBE_CLUSTER, 1, body)
    ops = described.cluster_authorized_operations
    # CREATE, ALTER, DESCRIBE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE: no authorizer.
    assert {code for code in range(32) if ops >> code & 1} == {5, 7, 8, 9, 10, 11, 12}


async def test_a_broker_asked_for_controllers_answers_mismatched_endpoint_type(client) -> None:
    described = await client.request(
        ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False, "endpoint_type": 2}
    )
    assert described.error_code == ErrorCode.MISMATCHED_ENDPOINT_TYPE == 114
    assert described.error_message == (
        "The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER"
    )
    assert list(described.brokers) == []


@pytest.mark.parametrize("endpoint_type", [0, 3, -1])
async def test_unknown_endpoint_type_is_unsupported(client, endpoint_type: int) -> None:
    described = await client.request(
        ApiKey.DESCRIBE_CLUSTER, 1, {"include_cluster_authorized_operations": False, "endpoint_type": endpoint_type}
    )
    assert (described.error_code, described.error_message) == (
        ErrorCode.UNSUPPORTED_ENDPOINT_TYPE,
        f"Unsupported endpoint type {endpoint_type}",
    )
    assert described.error_code == 115


async def test_metadata_answers_authorized_operations_only_when_asked(client) -> None:
    await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("ops"))
    body = {"topics": [{"name": "ops"}], "allow_auto_topic_creation": False}
    plain = await client.request(ApiKey.METADATA, 8, body)
    assert (plain.cluster_authorized_operations, plain.topics[0].topic_authorized_operations) == (
        NOT_REQUESTED,
        NOT_REQUESTED,
    )
    asked = await client.request(
        ApiKey.METADATA,
        8,
        {**body, "include_cluster_authorized_operations": True, "include_topic_authorized_operations": True},
    )
    # As Kafka without an authorizer: every operation of the cluster and of a topic.
    assert {c for c in range(32) if asked.cluster_authorized_operations >> c & 1} == {5, 7, 8, 9, 10, 11, 12}
    assert {c for c in range(32) if asked.topics[0].topic_authorized_operations >> c & 1} == {3, 4, 5, 6, 7, 8, 10, 11}
