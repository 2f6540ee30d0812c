"""Kafka's SASL connection state machine on a live in-process broker, over raw wire requests: what is accepted before
authentication, wrong mechanisms, bad passwords, PLAIN and SCRAM exchanges (v1 SaslAuthenticate and v0 raw tokens),
KIP-554's APIs, and per-listener advertised addresses."""

from __future__ import annotations

import base64
import struct

import pytest
from oncelog.protocol import ApiKey, ErrorCode, encode_request
from oncelog.protocol.sasl import scram
from oncelog.protocol.sasl.plain import encode_plain

PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'user_alice="alice-secret" user_admin="admin-secret";'
)
SASL_PROPERTIES = {
    "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    "advertised.listeners": "PLAINTEXT://plain.example:1111",
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
}
GENERIC_PLAIN_FAILURE = (
    "Authentication failed during authentication due to invalid credentials with SASL mechanism PLAIN"
)
SASL = "SASL_PLAINTEXT"
METADATA_V9 = {
    "topics": [],
    "allow_auto_topic_creation": False,
    "include_cluster_authorized_operations": False,
    "include_topic_authorized_operations": False,
}


@pytest.fixture
async def sasl_broker(start_broker):
    return await start_broker(properties=SASL_PROPERTIES)


async def _handshake(client, mechanism: str, version: int = 1):
    return await client.request(ApiKey.SASL_HANDSHAKE, version, {"mechanism": mechanism})


async def _authenticate(client, token: bytes, version: int = 2):
    return await client.request(ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": token})


async def _plain_login(client, user: str = "alice", password: str = "alice-secret"):
    await client.request(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert (await _handshake(client, "PLAIN")).error_code == ErrorCode.NONE
    return await _authenticate(client, encode_plain(user, password))


async def _scram_login(client, mechanism: str, user: str, password: str):
    """The client side of RFC 5802 over SaslAuthenticate; returns the last response."""
    assert (await _handshake(client, mechanism)).error_code == ErrorCode.NONE
    first = scram.ClientFirst(user, scram.new_nonce())
    reply = await _authenticate(client, first.to_bytes())
    if reply.error_code != ErrorCode.NONE:
        return reply
    server_first = scram.ServerFirst.parse(bytes(reply.auth_bytes))
    assert server_first.nonce.startswith(first.nonce) and server_first.nonce != first.nonce
    salted = scram.salted_password(mechanism, password, server_first.salt, server_first.iterations)
    without_proof = f"c=biws,r={server_first.nonce}"
    message = scram.auth_message(first, server_first, without_proof)
    proof = scram.client_proof(mechanism, salted, message)
    final = f"{without_proof},p={base64.b64encode(proof).decode()}".encode()
    reply = await _authenticate(client, final)
    if reply.error_code == ErrorCode.NONE:
        signature = scram.server_signature(mechanism, scram.server_key(mechanism, salted), message)
        assert scram.ServerFinal.parse(bytes(reply.auth_bytes)).signature == signature
    return reply


async def _add_scram_user(client, name: str, mechanism: str, password: str, iterations: int = 4096):
    salt = b"salt-of-" + name.encode()
    upsertion = {
        "name": name,
        "mechanism": scram.MECHANISMS[mechanism][1],
        "iterations": iterations,
        "salt": salt,
        "salted_password": scram.salted_password(mechanism, password, salt, iterations),
    }
    return await client.request(ApiKey.ALTER_USER_SCRAM_CREDENTIALS, 0, {"deletions": [], "upsertions": [upsertion]})


async def test_a_request_before_authentication_closes_the_connection(sasl_broker) -> None:
    client = await sasl_broker.connect(SASL)
    await client.send(ApiKey.METADATA, 9, METADATA_V9)
    assert await client.is_closed_by_peer()


async def test_authenticate_before_handshake_closes_the_connection(sasl_broker) -> None:
    client = await sasl_broker.connect(SASL)
    await client.send(ApiKey.SASL_AUTHENTICATE, 2, {"auth_bytes": encode_plain("alice", "alice-secret")})
    assert await client.is_closed_by_peer()


async def test_a_second_api_versions_closes_the_connection(sasl_broker) -> None:
    client = await sasl_broker.connect(SASL)
    versions = await client.request(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    keys = {k.api_key: (k.min_version, k.max_version) for k in versions.api_keys}
    assert keys[ApiKey.SASL_HANDSHAKE] == (0, 1) and keys[ApiKey.SASL_AUTHENTICATE] == (0, 2)
    await client.send(ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"})
    assert await client.is_closed_by_peer()


async def test_an_unsupported_mechanism_lists_the_enabled_ones_then_closes(sasl_broker) -> None:
    client = await sasl_broker.connect(SASL)
    response = await _handshake(client, "GSSAPI")
    assert response.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert list(response.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert await client.is_closed_by_peer()


async def test_a_bad_password_fails_with_kafkas_message_then_closes(sasl_broker) -> None:
    client = await sasl_broker.connect(SASL)
    response = await _plain_login(client, password="wrong")
    assert response.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert response.error_message == GENERIC_PLAIN_FAILURE
    assert await client.is_closed_by_peer()


async def test_plain_success_then_requests_are_served(sasl_broker) -> None:
    client = await sasl_broker.connect(SASL)
    response = await _plain_login(client)
    assert (response.error_code, response.error_message, bytes(response.auth_bytes)) == (ErrorCode.NONE, None, b"")
    assert response.session_lifetime_ms == 0
    metadata = await client.request(ApiKey.METADATA, 9, METADATA_V9)
    # The SASL listener has no advertised entry: its own address, with the port it bound.
    assert [(b.host, b.port) for b in metadata.brokers] == [("127.0.0.1", sasl_broker.node.bound_ports[SASL])]
    # Past authentication, Kafka answers both SASL APIs with ILLEGAL_SASL_STATE and keeps the connection.
    assert (await _handshake(client, "PLAIN")).error_code == ErrorCode.ILLEGAL_SASL_STATE
    again = await _authenticate(client, encode_plain("alice", "alice-secret"))
    assert again.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert again.error_message == "SaslAuthenticate request received after successful authentication"
    assert (await client.request(ApiKey.METADATA, 9, METADATA_V9)).brokers


async def test_a_request_other_than_authenticate_during_the_exchange(sasl_broker) -> None:
    client = await sasl_broker.connect(SASL)
    assert (await _handshake(client, "PLAIN")).error_code == ErrorCode.NONE
    response = await _handshake(client, "PLAIN")
    assert response.error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert await client.is_closed_by_peer()


async def test_plain_over_a_v0_handshake_uses_raw_tokens(sasl_broker) -> None:
    client = await sasl_broker.connect(SASL)
    assert (await _handshake(client, "PLAIN", version=0)).error_code == ErrorCode.NONE
    token = encode_plain("alice", "alice-secret")
    await client.send_raw(struct.pack(">i", len(token)) + token)
    assert await client.read_frame() == b""  # Kafka answers PLAIN's empty challenge with an empty frame
    assert (await client.request(ApiKey.METADATA, 9, METADATA_V9)).brokers
    bad = await sasl_broker.connect(SASL)
    assert (await _handshake(bad, "PLAIN", version=0)).error_code == ErrorCode.NONE
    token = encode_plain("alice", "wrong")
    await bad.send_raw(struct.pack(">i", len(token)) + token)
    assert await bad.is_closed_by_peer()


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_scram_users_created_by_alter_can_authenticate(sasl_broker, mechanism: str) -> None:
    admin = await sasl_broker.connect(SASL)
    await _plain_login(admin, "admin", "admin-secret")
    altered = await _add_scram_user(admin, "bob", mechanism, "bob-secret", 8192)
    assert [(r.user, r.error_code) for r in altered.results] == [("bob", ErrorCode.NONE)]
    described = await admin.request(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS, 0, {"users": [{"name": "bob"}]})
    assert [(i.mechanism, i.iterations) for i in described.results[0].credential_infos] == [
        (scram.MECHANISMS[mechanism][1], 8192)
    ]

    client = await sasl_broker.connect(SASL)
    assert (await _scram_login(client, mechanism, "bob", "bob-secret")).error_code == ErrorCode.NONE
    assert (await client.request(ApiKey.METADATA, 9, METADATA_V9)).brokers

    wrong = await sasl_broker.connect(SASL)
    failed = await _scram_login(wrong, mechanism, "bob", "not-bob-secret")
    assert failed.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert failed.error_message == (
        f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
    )
    assert await wrong.is_closed_by_peer()

    other = "SCRAM-SHA-512" if mechanism == "SCRAM-SHA-256" else "SCRAM-SHA-256"
    unknown = await sasl_broker.connect(SASL)
    assert (await _scram_login(unknown, other, "bob", "bob-secret")).error_code == (
        ErrorCode.SASL_AUTHENTICATION_FAILED
    )


async def test_scram_credentials_survive_a_restart(start_broker, tmp_path) -> None:
    broker = await start_broker(tmp_path / "d", properties=SASL_PROPERTIES)
    admin = await broker.connect()  # the PLAINTEXT listener needs no login
    assert (await _add_scram_user(admin, "carol", "SCRAM-SHA-512", "carol-secret")).results[0].error_code == 0
    await broker.stop()
    again = await start_broker(tmp_path / "d", properties=SASL_PROPERTIES)
    client = await again.connect(SASL)
    assert (await _scram_login(client, "SCRAM-SHA-512", "carol", "carol-secret")).error_code == ErrorCode.NONE


async def test_each_listener_advertises_its_own_address(sasl_broker) -> None:
    plain = await sasl_broker.connect()
    metadata = await plain.request(ApiKey.METADATA, 9, METADATA_V9)
    assert [(b.host, b.port) for b in metadata.brokers] == [("plain.example", 1111)]
    coordinator = await plain.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    assert (coordinator.host, coordinator.port) == ("plain.example", 1111)
    cluster = await plain.request(ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
    assert [(b.host, b.port) for b in cluster.brokers] == [("plain.example", 1111)]

    sasl = await sasl_broker.connect(SASL)
    await _plain_login(sasl)
    own = ("127.0.0.1", sasl_broker.node.bound_ports[SASL])
    coordinator = await sasl.request(ApiKey.FIND_COORDINATOR, 3, {"key": "g", "key_type": 0})
    assert (coordinator.host, coordinator.port) == own
    cluster = await sasl.request(ApiKey.DESCRIBE_CLUSTER, 0, {"include_cluster_authorized_operations": False})
    assert [(b.host, b.port) for b in cluster.brokers] == [own]


async def test_sasl_apis_on_a_plaintext_listener(sasl_broker) -> None:
    client = await sasl_broker.connect()
    assert (await _handshake(client, "PLAIN")).error_code == ErrorCode.ILLEGAL_SASL_STATE
    assert (await client.request(ApiKey.METADATA, 9, METADATA_V9)).brokers


async def test_garbage_during_authentication_closes_cleanly(sasl_broker) -> None:
    for frame in (b"\x60\x82\x01\x00garbage-gssapi-token", encode_request(ApiKey.SASL_HANDSHAKE, 1, 1, "c", {})[:9]):
        client = await sasl_broker.connect(SASL)
        await client.send_raw(struct.pack(">i", len(frame)) + frame)
        assert await client.is_closed_by_peer()
    client = await sasl_broker.connect(SASL)  # the broker still serves
    assert (await _plain_login(client)).error_code == ErrorCode.NONE
    response = await client.request(
        ApiKey.API_VERSIONS, 3, {"client_software_name": "t", "client_software_version": "1"}
    )
    assert response.error_code == ErrorCode.NONE
