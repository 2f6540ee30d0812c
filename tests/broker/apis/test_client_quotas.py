"""DescribeClientQuotas through the wire: no quotas are kept, so a valid filter matches nothing; a bad filter gets
Kafka's error and message (ClientQuotasImage.describe)."""

from __future__ import annotations

import pytest
from oncelog.protocol import ApiKey, ErrorCode

EXACT, DEFAULT, SPECIFIED = 0, 1, 2


def _component(entity_type: str, match_type: int, match: str | None = None) -> dict:
    return {"entity_type": entity_type, "match_type": match_type, "match": match}


@pytest.mark.parametrize("version", [0, 1])
@pytest.mark.parametrize(
    "components",
    [
        [],
        [_component("user", EXACT, "alice")],
        [_component("user", DEFAULT), _component("client-id", SPECIFIED)],
        [_component("ip", EXACT, "10.0.0.1")],
    ],
)
@pytest.mark.parametrize("strict", [False, True])
async def test_valid_filters_match_nothing(client, version: int, components: list[dict], strict: bool) -> None:
    body = {"components": components, "strict": strict}
    response = await client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, version, body)
    assert (response.error_code, response.error_message, response.entries) == (ErrorCode.NONE, "", [])


@pytest.mark.parametrize(
    ("components", "error", "message"),
    [
        ([_component("", SPECIFIED)], ErrorCode.INVALID_REQUEST, "Invalid empty entity type."),
        (
            [_component("user", SPECIFIED), _component("user", EXACT, "a")],
            ErrorCode.INVALID_REQUEST,
            "Entity type user cannot appear more than once in the filter.",
        ),
        ([_component("group", SPECIFIED)], ErrorCode.UNSUPPORTED_VERSION, "Unsupported entity type group"),
        (
            [_component("user", EXACT)],
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_EXACT, but set match string to null.",
        ),
        (
            [_component("client-id", DEFAULT, "c")],
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_DEFAULT, but also specified a match string.",
        ),
        (
            [_component("user", SPECIFIED, "u")],
            ErrorCode.INVALID_REQUEST,
            "Request specified MATCH_TYPE_SPECIFIED, but also specified a match string.",
        ),
        ([_component("user", 3)], ErrorCode.INVALID_REQUEST, "Unknown match type 3"),
        (
            [_component("ip", SPECIFIED), _component("user", DEFAULT)],
            ErrorCode.INVALID_REQUEST,
            "Invalid entity filter component combination. IP filter component should not be used with user or "
            "clientId filter component.",
        ),
        # The first problem in Kafka's order wins: the unknown entity type before the second component's.
        (
            [_component("group", EXACT), _component("", SPECIFIED)],
            ErrorCode.UNSUPPORTED_VERSION,
            "Unsupported entity type group",
        ),
    ],
)
async def test_invalid_filters(client, components: list[dict], error: int, message: str) -> None:
    response = await client.request(ApiKey.DESCRIBE_CLIENT_QUOTAS, 1, {"components": components, "strict": False})
    assert (response.error_code, response.error_message, response.entries) == (error, message, None)
