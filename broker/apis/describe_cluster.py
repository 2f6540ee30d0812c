"""DescribeCluster (60): the cluster's brokers and its controller (KIP-700, KIP-919), from the cluster view."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.apis.metadata import advertised_brokers
from oncelog.broker.authorized_operations import CLUSTER_OPERATIONS, OMITTED
from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode
from oncelog.protocol.messages.describe_cluster import ENDPOINT_TYPE_BROKER, ENDPOINT_TYPE_CONTROLLER

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

_ENDPOINT_NAMES = {ENDPOINT_TYPE_BROKER: "BROKER", ENDPOINT_TYPE_CONTROLLER: "CONTROLLER"}


def _endpoint_error(requested: int, version: int) -> dict | None:
    """Kafka's answer when the request asks for other than brokers; v0 cannot say which error it is."""
    if requested not in _ENDPOINT_NAMES:
        error = ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
        message = f"Unsupported endpoint type {requested}"
    elif requested != ENDPOINT_TYPE_BROKER:
        error = ErrorCode.MISMATCHED_ENDPOINT_TYPE
        message = (
            f"The request was sent to an endpoint of type BROKER, but we wanted an endpoint of type "
            f"{_ENDPOINT_NAMES[requested]}"
        )
    else:
        return None
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.INVALID_REQUEST if version == 0 else error,
        "error_message": message,
        "cluster_id": "",
        "brokers": [],
    }


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    failure = _endpoint_error(body.endpoint_type, request.version)
    if failure is not None:
        return failure
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "endpoint_type": ENDPOINT_TYPE_BROKER,
        "cluster_id": broker.metadata.cluster_id,
        "controller_id": broker.cluster.controller_id(),
        "brokers": [
            {"broker_id": b["node_id"], "host": b["host"], "port": b["port"], "rack": b["rack"]}
            for b in advertised_brokers(broker, request.listener)
        ],
        "cluster_authorized_operations": (
            CLUSTER_OPERATIONS if body.include_cluster_authorized_operations else OMITTED
        ),
    }
