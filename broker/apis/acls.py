"""DescribeAcls (29), CreateAcls (30), DeleteAcls (31): answered as Kafka answers them with no authorizer configured
(its AclApis): SECURITY_DISABLED, since oncelog has no authorizer and keeps no ACLs.

- DescribeAcls: one top-level SECURITY_DISABLED, "No Authorizer is configured on the broker", no resources.
- CreateAcls: SECURITY_DISABLED, "No Authorizer is configured.", for each creation.
- DeleteAcls: SECURITY_DISABLED, "No Authorizer is configured.", for each filter, with no matching ACLs.

A request naming the UNKNOWN (0) resource type, pattern type, operation or permission type is refused as Kafka's
request classes refuse it while parsing: the connection is closed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from oncelog.broker.request import MalformedRequest, Request
from oncelog.protocol import ErrorCode

#: The UNKNOWN code of Kafka's ResourceType, PatternType, AclOperation and AclPermissionType.
UNKNOWN = 0
#: AclApis' messages: DescribeAcls sets its own; CreateAcls and DeleteAcls raise SecurityDisabledException.
DESCRIBE_MESSAGE = "No Authorizer is configured on the broker"
ALTER_MESSAGE = "No Authorizer is configured."


def _refuse_unknown(api: str, codes: Iterable[int]) -> None:
    if UNKNOWN in codes:
        raise MalformedRequest(f"{api} contains UNKNOWN elements")


def _filter_codes(item: Any) -> tuple[int, ...]:
    return item.resource_type_filter, item.pattern_type_filter, item.operation, item.permission_type


async def handle_describe(broker: object, request: Request) -> dict:
    _refuse_unknown("DescribeAclsRequest", _filter_codes(request.body))
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.SECURITY_DISABLED,
        "error_message": DESCRIBE_MESSAGE,
        "resources": [],
    }


async def handle_create(broker: object, request: Request) -> dict:
    creations = request.body.creations
    for c in creations:
        _refuse_unknown("CreateAclsRequest", (c.resource_type, c.resource_pattern_type, c.operation, c.permission_type))
    result = {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": ALTER_MESSAGE}
    return {"throttle_time_ms": 0, "results": [result] * len(creations)}


async def handle_delete(broker: object, request: Request) -> dict:
    filters = request.body.filters
    for f in filters:
        _refuse_unknown("DeleteAclsRequest", _filter_codes(f))
    result = {"error_code": ErrorCode.SECURITY_DISABLED, "error_message": ALTER_MESSAGE, "matching_acls": []}
    return {"throttle_time_ms": 0, "filter_results": [result] * len(filters)}
