"""AlterConfigs (33) and IncrementalAlterConfigs (44): golden bytes written by hand from Kafka's message layouts
(AlterConfigsRequest.json etc.), and the version ranges."""

from __future__ import annotations

from oncelog.protocol import (
    DECLARED_VERSIONS,
    ApiKey,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from support.wire_samples import from_hex as h
from support.wire_samples import plain

# IncrementalAlterConfigs v1 request (flexible), header v2 (client_id "c", empty tags): one resource {type 2, "t",
# configs [{"retention.ms", SET, "1000"}, {"cleanup.policy", DELETE, null}]}, validate_only true.
INCREMENTAL_V1_REQ = h("""
    002c 0001 00000003 0001 63 00
    02  02 02 74
        03  0d 726574656e74696f6e2e6d73 00 05 31303030 00
            0f 636c65616e75702e706f6c696379 01 00 00
        00
    01 00
""")

# AlterConfigs v0 request, header v1 (client_id "c"): one resource {type 2, "t", configs [{"retention.ms",
# "1000"}]}, validate_only false.
ALTER_V0_REQ = h("""
    0021 0000 00000004 0001 63
    00000001  02 0001 74
        00000001  000c 726574656e74696f6e2e6d73 0004 31303030
    00
""")

# IncrementalAlterConfigs v1 response, header v1 (correlation 3, empty tags): throttle 0, one response
# {error 40 INVALID_CONFIG, message "x", type 2, "t"}.
INCREMENTAL_V1_RESP = h("00000003 00  00000000  02 0028 02 78 02 02 74 00  00")

# AlterConfigs v2 response (flexible): throttle 0, one response {error 0, null message, type 4, "1"}.
ALTER_V2_RESP = h("00000004 00  00000000  02 0000 00 04 02 31 00  00")


def test_incremental_alter_configs_v1_request() -> None:
    header = decode_request_header(INCREMENTAL_V1_REQ, DECLARED_VERSIONS)
    body = decode_request(header, INCREMENTAL_V1_REQ)
    assert plain(body) == {
        "resources": [
            {
                "resource_type": 2,
                "resource_name": "t",
                "configs": [
                    {"name": "retention.ms", "config_operation": 0, "value": "1000"},
                    {"name": "cleanup.policy", "config_operation": 1, "value": None},
                ],
            }
        ],
        "validate_only": True,
    }
    assert encode_request(ApiKey.INCREMENTAL_ALTER_CONFIGS, 1, 3, "c", body) == INCREMENTAL_V1_REQ


def test_alter_configs_v0_request() -> None:
    header = decode_request_header(ALTER_V0_REQ, DECLARED_VERSIONS)
    body = decode_request(header, ALTER_V0_REQ)
    assert plain(body) == {
        "resources": [
            {"resource_type": 2, "resource_name": "t", "configs": [{"name": "retention.ms", "value": "1000"}]}
        ],
        "validate_only": False,
    }
    assert encode_request(ApiKey.ALTER_CONFIGS, 0, 4, "c", body) == ALTER_V0_REQ


def test_responses() -> None:
    for key, version, correlation, data, entry in (
        (
            ApiKey.INCREMENTAL_ALTER_CONFIGS,
            1,
            3,
            INCREMENTAL_V1_RESP,
            {"error_code": 40, "error_message": "x", "resource_type": 2, "resource_name": "t"},
        ),
        (
            ApiKey.ALTER_CONFIGS,
            2,
            4,
            ALTER_V2_RESP,
            {"error_code": 0, "error_message": None, "resource_type": 4, "resource_name": "1"},
        ),
    ):
        body = {"throttle_time_ms": 0, "responses": [entry]}
        header = decode_request_header(encode_request(key, version, correlation, None, {}), DECLARED_VERSIONS)
        assert encode_response(header, body) == data
        assert plain(decode_response(key, version, data)) == body


def test_declared_ranges() -> None:
    assert DECLARED_VERSIONS[ApiKey.ALTER_CONFIGS] == (0, 2)
    assert DECLARED_VERSIONS[ApiKey.INCREMENTAL_ALTER_CONFIGS] == (0, 1)
