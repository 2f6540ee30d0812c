"""SaslHandshake, SaslAuthenticate, DescribeUserScramCredentials and AlterUserScramCredentials: golden bytes written
by hand from Kafka's message layouts (clients/src/main/resources/common/message/Sasl*.json,
*UserScramCredentials*.json), and the versions declared and advertised (Kafka 4.x's ranges)."""

from __future__ import annotations

import pytest
from oncelog.protocol import (
    DECLARED_VERSIONS,
    SUPPORTED_VERSIONS,
    ApiKey,
    decode_response,
    encode_request,
)
from support.wire_samples import decode_frame as _request
from support.wire_samples import from_hex as h
from support.wire_samples import plain
from support.wire_samples import response_bytes as _response_bytes


@pytest.mark.parametrize(
    ("key", "versions"),
    [
        (ApiKey.SASL_HANDSHAKE, (0, 1)),
        (ApiKey.SASL_AUTHENTICATE, (0, 2)),
        (ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, (0, 0)),
        (ApiKey.ALTER_USER_SCRAM_CREDENTIALS, (0, 0)),
    ],
)
def test_declared_and_advertised_versions(key: ApiKey, versions: tuple[int, int]) -> None:
    assert DECLARED_VERSIONS[key] == versions
    assert SUPPORTED_VERSIONS[key] == versions


# ------------------------------------------------------------------------------------------------ SaslHandshake
# v1 request (never flexible), header v1 with client_id "c": mechanism "PLAIN".
HANDSHAKE_V1_REQ = h("0011 0001 00000001 0001 63  0005 504c41494e")
# v0 request: the same body.
HANDSHAKE_V0_REQ = h("0011 0000 00000001 0001 63  0005 504c41494e")
# v1 response, header v0: error 33 (UNSUPPORTED_SASL_MECHANISM), mechanisms ["PLAIN", "SCRAM-SHA-256"].
HANDSHAKE_V1_RESP = h("00000007  0021 00000002 0005 504c41494e 000d 534352414d2d5348412d323536")


def test_sasl_handshake() -> None:
    assert plain(_request(HANDSHAKE_V1_REQ)) == {"mechanism": "PLAIN"}
    assert plain(_request(HANDSHAKE_V0_REQ)) == {"mechanism": "PLAIN"}
    assert encode_request(ApiKey.SASL_HANDSHAKE, 1, 1, "c", {"mechanism": "PLAIN"}) == HANDSHAKE_V1_REQ
    body = {"error_code": 33, "mechanisms": ["PLAIN", "SCRAM-SHA-256"]}
    assert plain(decode_response(ApiKey.SASL_HANDSHAKE, 1, HANDSHAKE_V1_RESP)) == body
    assert _response_bytes(ApiKey.SASL_HANDSHAKE, 1, body) == HANDSHAKE_V1_RESP


# ------------------------------------------------------------------------------------------------ SaslAuthenticate
# v0 request (classic): auth_bytes 00 61 00 62 (a PLAIN token "\0a\0b").
AUTH_V0_REQ = h("0024 0000 00000001 0001 63  00000004 00610062")
# v2 request (flexible), header v2 (empty tags): compact auth_bytes, tags.
AUTH_V2_REQ = h("0024 0002 00000001 0001 63 00  05 00610062 00")
# v0 response, header v0: error 58 (SASL_AUTHENTICATION_FAILED), message "x", auth_bytes empty -- no lifetime.
AUTH_V0_RESP = h("00000007  003a 0001 78 00000000")
# v1 response: the same plus session_lifetime_ms 0.
AUTH_V1_RESP = h("00000007  003a 0001 78 00000000 0000000000000000")
# v2 response, header v1 (tags): error 0, message null, auth_bytes "ab", lifetime 3600000, tags.
AUTH_V2_RESP = h("00000007 00  0000 00 03 6162 000000000036ee80 00")


def test_sasl_authenticate_requests() -> None:
    assert bytes(_request(AUTH_V0_REQ).auth_bytes) == b"\0a\0b"
    assert bytes(_request(AUTH_V2_REQ).auth_bytes) == b"\0a\0b"
    assert encode_request(ApiKey.SASL_AUTHENTICATE, 0, 1, "c", {"auth_bytes": b"\0a\0b"}) == AUTH_V0_REQ
    assert encode_request(ApiKey.SASL_AUTHENTICATE, 2, 1, "c", {"auth_bytes": b"\0a\0b"}) == AUTH_V2_REQ


def test_sasl_authenticate_responses() -> None:
    failed = {"error_code": 58, "error_message": "x", "auth_bytes": b"", "session_lifetime_ms": 0}
    assert plain(decode_response(ApiKey.SASL_AUTHENTICATE, 1, AUTH_V1_RESP)) == failed
    assert _response_bytes(ApiKey.SASL_AUTHENTICATE, 1, failed) == AUTH_V1_RESP
    assert _response_bytes(ApiKey.SASL_AUTHENTICATE, 0, failed) == AUTH_V0_RESP
    ok = {"error_code": 0, "error_message": None, "auth_bytes": b"ab", "session_lifetime_ms": 3_600_000}
    assert plain(decode_response(ApiKey.SASL_AUTHENTICATE, 2, AUTH_V2_RESP)) == ok
    assert _response_bytes(ApiKey.SASL_AUTHENTICATE, 2, ok) == AUTH_V2_RESP


# ------------------------------------------------------------------------------------ DescribeUserScramCredentials
# v0 request (flexible), header v2: users null (every user), tags.
DESCRIBE_ALL_REQ = h("0032 0000 00000001 0001 63 00  00 00")
# v0 request: users [{"alice", tags}], tags.
DESCRIBE_ALICE_REQ = h("0032 0000 00000001 0001 63 00  02 06 616c696365 00 00")
# v0 response, header v1: throttle 0, error 0, message null, results [{"alice", 0, null, credential_infos
# [{SCRAM-SHA-256 (1), 4096, tags}, {SCRAM-SHA-512 (2), 8192, tags}], tags}], tags.
DESCRIBE_RESP = h("00000007 00  00000000 0000 00 02 06 616c696365 0000 00 03 01 00001000 00 02 00002000 00 00 00")


def test_describe_user_scram_credentials() -> None:
    assert _request(DESCRIBE_ALL_REQ).users is None
    assert plain(_request(DESCRIBE_ALICE_REQ)) == {"users": [{"name": "alice"}]}
    assert encode_request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, 1, "c", {"users": None}) == DESCRIBE_ALL_REQ
    body = {
        "throttle_time_ms": 0,
        "error_code": 0,
        "error_message": None,
        "results": [
            {
                "user": "alice",
                "error_code": 0,
                "error_message": None,
                "credential_infos": [{"mechanism": 1, "iterations": 4096}, {"mechanism": 2, "iterations": 8192}],
            }
        ],
    }
    assert plain(decode_response(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, DESCRIBE_RESP)) == body
    assert _response_bytes(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, body) == DESCRIBE_RESP


# --------------------------------------------------------------------------------------- AlterUserScramCredentials
# v0 request (flexible), header v2: deletions [{"bob", SCRAM-SHA-512 (2), tags}], upsertions [{"alice",
# SCRAM-SHA-256 (1), 4096, salt 01 02, salted_password 03 04, tags}], tags.
ALTER_REQ = h("0033 0000 00000001 0001 63 00  02 04 626f62 02 00  02 06 616c696365 01 00001000 03 0102 03 0304 00  00")
# v0 response, header v1: throttle 0, results [{"alice", 93 (UNACCEPTABLE_CREDENTIAL), "Too few iterations", tags}].
ALTER_RESP = h("00000007 00  00000000 02 06 616c696365 005d 13 546f6f2066657720697465726174696f6e73 00 00")


def test_alter_user_scram_credentials() -> None:
    request = {
        "deletions": [{"name": "bob", "mechanism": 2}],
        "upsertions": [
            {"name": "alice", "mechanism": 1, "iterations": 4096, "salt": b"\1\2", "salted_password": b"\3\4"}
        ],
    }
    assert plain(_request(ALTER_REQ)) == request
    assert encode_request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, 1, "c", request) == ALTER_REQ
    body = {
        "throttle_time_ms": 0,
        "results": [{"user": "alice", "error_code": 93, "error_message": "Too few iterations"}],
    }
    assert plain(decode_response(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, ALTER_RESP)) == body
    assert _response_bytes(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, body) == ALTER_RESP
