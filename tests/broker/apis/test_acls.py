"""DescribeAcls, CreateAcls, DeleteAcls through the wire: SECURITY_DISABLED as from Kafka without an authorizer
(AclApis), and the connection closed for UNKNOWN codes, as Kafka's request parsing refuses them."""

from __future__ import annotations

import pytest
from oncelog.protocol import ApiKey, ErrorCode

ANY, TOPIC, LITERAL, READ, ALLOW = 1, 2, 3, 3, 3


def _filter(**overrides: object) -> dict:
    return {
        "resource_type_filter": ANY,
        "resource_name_filter": None,
        "pattern_type_filter": ANY,
        "principal_filter": None,
        "host_filter": None,
        "operation": ANY,
        "permission_type": ANY,
        **overrides,
    }


def _creation(**overrides: object) -> dict:
    return {
        "resource_type": TOPIC,
        "resource_name": "t",
        "resource_pattern_type": LITERAL,
        "principal": "User:alice",
        "host": "*",
        "operation": READ,
        "permission_type": ALLOW,
        **overrides,
    }


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_describe_is_security_disabled(client, version: int) -> None:
    response = await client.request(ApiKey.DESCRIBE_ACLS, version, _filter())
    assert (response.error_code, response.error_message, list(response.resources)) == (
        ErrorCode.SECURITY_DISABLED,
        "No Authorizer is configured on the broker",
        [],
    )
    assert ErrorCode.SECURITY_DISABLED == 54


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_create_answers_security_disabled_for_each_creation(client, version: int) -> None:
    body = {"creations": [_creation(), _creation(resource_name="u", operation=4)]}
    response = await client.request(ApiKey.CREATE_ACLS, version, body)
    assert [(r.error_code, r.error_message) for r in response.results] == [
        (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
    ] * 2
    assert list((await client.request(ApiKey.CREATE_ACLS, version, {"creations": []})).results) == []


@pytest.mark.parametrize("version", [1, 2, 3])
async def test_delete_answers_security_disabled_for_each_filter(client, version: int) -> None:
    body = {"filters": [_filter(), _filter(resource_type_filter=TOPIC, resource_name_filter="t"), _filter()]}
    response = await client.request(ApiKey.DELETE_ACLS, version, body)
    assert [(r.error_code, r.error_message, list(r.matching_acls)) for r in response.filter_results] == [
        (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.", [])
    ] * 3


@pytest.mark.parametrize(
    ("key", "body"),
    [
        (ApiKey.DESCRIBE_ACLS, _filter(resource_type_filter=0)),
        (ApiKey.DESCRIBE_ACLS, _filter(pattern_type_filter=0)),
        (ApiKey.DESCRIBE_ACLS, _filter(operation=0)),
        (ApiKey.DESCRIBE_ACLS, _filter(permission_type=0)),
        (ApiKey.CREATE_ACLS, {"creations": [_creation(), _creation(resource_type=0)]}),
        (ApiKey.CREATE_ACLS, {"creations": [_creation(resource_pattern_type=0)]}),
        (ApiKey.CREATE_ACLS, {"creations": [_creation(operation=0)]}),
        (ApiKey.CREATE_ACLS, {"creations": [_creation(permission_type=0)]}),
        (ApiKey.DELETE_ACLS, {"filters": [_filter(), _filter(resource_type_filter=0)]}),
        (ApiKey.DELETE_ACLS, {"filters": [_filter(permission_type=0)]}),
    ],
)
async def test_unknown_codes_close_the_connection(broker, client, key: ApiKey, body: dict) -> None:
    await client.send(key, 2, body)
    assert await client.is_closed_by_peer()
    other = await broker.connect()  # the broker itself goes on serving
    assert (await other.request(ApiKey.DESCRIBE_ACLS, 2, _filter())).error_code == ErrorCode.SECURITY_DISABLED
