"""DescribeClientQuotas (48, KIP-546): oncelog keeps no client quotas, so a valid filter matches nothing.

The filter is checked as Kafka's ClientQuotasImage.describe checks it, in its order, and a bad one is answered with
the error and message Kafka gives and null ``entries``: an empty or repeated entity type, a match string where
the match type takes none (or none where it takes one), or an unknown match type is INVALID_REQUEST; an entity
type other than ``user``, ``client-id`` and ``ip`` is UNSUPPORTED_VERSION; ``ip`` with ``user`` or ``client-id``
is INVALID_REQUEST. A valid filter, strict or not, gets no entries and, as from Kafka, an empty error message.
"""

from __future__ import annotations

from typing import Any

from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode
from oncelog.protocol.messages.describe_client_quotas import (
    MATCH_TYPE_DEFAULT,
    MATCH_TYPE_EXACT,
    MATCH_TYPE_SPECIFIED,
)

#: Kafka's ClientQuotaEntity types.
USER, CLIENT_ID, IP = "user", "client-id", "ip"


def _component_problem(component: Any, seen: set[str]) -> tuple[int, str] | None:
    entity_type, match_type, match = component.entity_type, component.match_type, component.match
    if not entity_type:
        return ErrorCode.INVALID_REQUEST, "Invalid empty entity type."
    if entity_type in seen:
        return ErrorCode.INVALID_REQUEST, f"Entity type {entity_type} cannot appear more than once in the filter."
    if entity_type not in (IP, USER, CLIENT_ID):
        return ErrorCode.UNSUPPORTED_VERSION, f"Unsupported entity type {entity_type}"
    if match_type == MATCH_TYPE_EXACT:
        if match is None:
            return ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_EXACT, but set match string to null."
    elif match_type == MATCH_TYPE_DEFAULT:
        if match is not None:
            return ErrorCode.INVALID_REQUEST, "Request specified MATCH_TYPE_DEFAULT, but also specified a match string."
    elif match_type == MATCH_TYPE_SPECIFIED:
        if match is not None:
            return (
                ErrorCode.INVALID_REQUEST,
                "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
            )
    else:
        return ErrorCode.INVALID_REQUEST, f"Unknown match type {match_type}"
    return None


def filter_problem(components: list[Any]) -> tuple[int, str] | None:
    """Kafka's error code and message for an invalid quota filter, or None when it is valid."""
    seen: set[str] = set()
    for component in components:
        problem = _component_problem(component, seen)
        if problem is not None:
            return problem
        seen.add(component.entity_type)
    if IP in seen and (USER in seen or CLIENT_ID in seen):
        return ErrorCode.INVALID_REQUEST, (
            "Invalid entity filter component combination. IP filter component should not be used with user or "
            "clientId filter component."
        )
    return None


async def handle(broker: object, request: Request) -> dict:
    problem = filter_problem(request.body.components)
    if problem is not None:
        error, message = problem
        return {"throttle_time_ms": 0, "error_code": error, "error_message": message, "entries": None}
    return {"throttle_time_ms": 0, "error_code": ErrorCode.NONE, "error_message": "", "entries": []}
