"""Encoding refuses a key its message has at no version (a misspelt field), at every nesting level, compiled and
interpreted; a field of another version of the same message is accepted and left out of this version's bytes."""

from __future__ import annotations

import pytest
from oncelog.protocol import SCHEMAS, ApiKey, EncodeError, RequestHeader, encode_request, encode_response


def _header(key: ApiKey, version: int) -> RequestHeader:
    return RequestHeader(key, version, 7, "c", 0)


@pytest.mark.parametrize("version", [0, 3, 5])
def test_a_misspelt_response_field_is_refused(version: int) -> None:
    # The bug this guards against: {"eror_code": 47} went out as error_code 0, an error turned into success.
    with pytest.raises(EncodeError, match=rf"EndTxnResponse v{version}: field\(s\) not in schema: eror_code"):
        encode_response(_header(ApiKey.END_TXN, version), {"throttle_time_ms": 0, "eror_code": 47})


@pytest.mark.parametrize("compiled", [True, False])
def test_a_misspelt_field_in_a_nested_struct_is_refused(compiled: bool) -> None:
    partition = {"partition_index": 0, "error_code": 0, "high_watermark": 5, "recrods": b""}
    body = {"responses": [{"topic": "t", "partitions": [partition]}]}
    construct = SCHEMAS[ApiKey.FETCH][1].construct(12, compiled=compiled)
    with pytest.raises(EncodeError, match="not in schema: recrods"):
        construct.build(body)
    del partition["recrods"]
    assert construct.build(body)  # the same body without the stray key encodes


@pytest.mark.parametrize("compiled", [True, False])
def test_a_misspelt_field_in_a_flexible_struct_with_tagged_fields_is_refused(compiled: bool) -> None:
    construct = SCHEMAS[ApiKey.API_VERSIONS][1].construct(3, compiled=compiled)
    with pytest.raises(EncodeError, match="not in schema: supported_feature"):
        construct.build({"error_code": 0, "api_keys": [], "supported_feature": []})


def test_a_misspelt_request_field_is_refused() -> None:
    body = {"transactional_id": "t", "producer_id": 1, "producer_epoch": 0, "comitted": True}
    with pytest.raises(EncodeError, match="EndTxnRequest v3: field\\(s\\) not in schema: comitted"):
        encode_request(ApiKey.END_TXN, 3, 1, "c", body)


def test_a_field_of_another_version_is_left_out() -> None:
    # One dict for every version, as handlers build it: EndTxn's producer_id/epoch exist from v5 only.
    body = {"throttle_time_ms": 0, "error_code": 0, "producer_id": 9, "producer_epoch": 2}
    without = {"throttle_time_ms": 0, "error_code": 0}
    assert encode_response(_header(ApiKey.END_TXN, 4), body) == encode_response(_header(ApiKey.END_TXN, 4), without)
    assert encode_response(_header(ApiKey.END_TXN, 5), body) != encode_response(_header(ApiKey.END_TXN, 5), without)
