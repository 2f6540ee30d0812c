"""protocol.api.APIS: one registry of APIs, from which the advertised and declared ranges and schemas derive."""

from __future__ import annotations

import pytest
from oncelog.protocol import APIS, DECLARED_VERSIONS, SCHEMAS, SUPPORTED_VERSIONS, Api, ApiKey
from oncelog.protocol.messages import end_txn, fetch


def test_views_derive_from_the_registry() -> None:
    for key, api in APIS.items():
        assert SUPPORTED_VERSIONS[key] == api.advertised
        assert DECLARED_VERSIONS[key] == api.declared
        assert SCHEMAS[key] == (api.messages.REQUEST, api.messages.RESPONSE)
    assert set(SUPPORTED_VERSIONS) == set(DECLARED_VERSIONS) == set(SCHEMAS) == set(APIS)


def test_an_api_with_another_keys_schemas_is_refused() -> None:
    with pytest.raises(ValueError, match="schemas of api key 1"):
        Api(ApiKey.END_TXN, fetch, (0, 1))


def test_an_advertised_range_beyond_the_schemas_is_refused() -> None:
    with pytest.raises(ValueError, match="outside declared"):
        Api(ApiKey.END_TXN, end_txn, (0, 6))
