"""An SSL:// listener in-process: requests over TLS (large ones too), bad clients closed without harm, mTLS."""

from __future__ import annotations

import ssl
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from oncelog.broker.tls_socket import TLS_RECORD_BYTES
from oncelog.protocol import ApiKey, ErrorCode, decode_response, encode_request
from oncelog.protocol.records import iter_records
from support.tls import Pki, make_pki

from broker.conftest import RunningBroker, WireClient
from broker.helpers import batch, create_topic_body, fetch_body, produce_body

_SIZE = struct.Struct(">i")
SSL_LISTENER = {"listeners": "SSL://127.0.0.1:0"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def client_context(pki: Pki, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca))
    if cert is not None:
        context.load_cert_chain(str(cert), str(key))
    return context


async def connect_tls(broker: RunningBroker, context: ssl.SSLContext) -> WireClient:
    tcp = await trio.open_tcp_stream("127.0.0.1", broker.port)
    stream = trio.SSLStream(tcp, context, server_hostname="localhost")
    await stream.do_handshake()
    return WireClient(stream)  # type: ignore[arg-type]


async def start_tls(start_broker: Callable, settings: dict[str, str], **extra: str) -> RunningBroker:
    return await start_broker(**SSL_LISTENER, **settings, **extra)


async def api_versions_ok(client: WireClient) -> bool:
    body = {"client_software_name": "tls-test", "client_software_version": "1"}
    response = await client.request(ApiKey.API_VERSIONS, 3, body)
    return response.error_code == ErrorCode.NONE


async def read_all(stream: trio.SocketStream) -> bytes:
    """Everything the broker sends until it closes the connection."""
    data = bytearray()
    with trio.fail_after(10):
        while True:
            try:
                chunk = await stream.receive_some(65536)
            except trio.BrokenResourceError:
                return bytes(data)
            if not chunk:
                return bytes(data)
            data += chunk


async def test_requests_are_answered_over_tls(start_broker, pki) -> None:
    broker = await start_tls(start_broker, pki.keystore_settings())
    assert list(broker.node.ssl_contexts) == [broker.node.listeners[0].name]
    client = await connect_tls(broker, client_context(pki))
    assert await api_versions_ok(client)
    created = await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("secure"))
    assert created.topics[0].error_code == ErrorCode.NONE
    produced = await client.request(ApiKey.PRODUCE, 3, produce_body("secure", 0, batch([b"a", b"b"])))
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    fetched = await client.request(ApiKey.FETCH, 4, fetch_body("secure", 0, 0))
    assert [r.value for _, r in iter_records(fetched.responses[0].partitions[0].records)] == [b"a", b"b"]


async def test_large_requests_and_responses_cross_many_tls_records(start_broker, pki) -> None:
    # A produce frame far above 64 KiB is received into a buffer of its own (receive_into), a TLS record at a time;
    # small requests pipelined behind it in the same write must be answered too.
    broker = await start_tls(start_broker, pki.keystore_settings())
    client = await connect_tls(broker, client_context(pki))
    assert (await client.request(ApiKey.CREATE_TOPICS, 4, create_topic_body("big"))).topics[0].error_code == 0
    values = [bytes([i]) * 300_000 for i in range(3)]
    assert sum(map(len, values)) > 40 * TLS_RECORD_BYTES
    data = encode_request(ApiKey.PRODUCE, 3, 7, "tls-test", produce_body("big", 0, batch(values)))
    small = encode_request(ApiKey.METADATA, 1, 8, "tls-test", {"topics": []})
    await client.send_raw(_SIZE.pack(len(data)) + data + _SIZE.pack(len(small)) + small)
    produced = decode_response(ApiKey.PRODUCE, 3, await client.read_frame())
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.NONE
    assert struct.unpack_from(">i", await client.read_frame())[0] == 8
    fetched = await client.request(ApiKey.FETCH, 4, fetch_body("big", 0, 0, partition_max_bytes=4 << 20))
    assert [r.value for _, r in iter_records(fetched.responses[0].partitions[0].records)] == values


@pytest.mark.parametrize(
    "first_bytes",
    [
        pytest.param(b"\x00\x01garbage that is not TLS at all" * 10, id="garbage"),
        pytest.param(
            _SIZE.pack(len(r := encode_request(ApiKey.API_VERSIONS, 0, 1, "plain", {}))) + r, id="plaintext-kafka"
        ),
    ],
)
async def test_a_non_tls_client_is_closed_and_the_broker_keeps_serving(start_broker, pki, first_bytes) -> None:
    broker = await start_tls(start_broker, pki.keystore_settings())
    plain = await trio.open_tcp_stream("127.0.0.1", broker.port)
    await plain.send_all(first_bytes)
    answer = await read_all(plain)
    # At most a TLS alert record (content type 21), never a Kafka response.
    assert answer == b"" or answer[0] == 21, answer[:16]
    client = await connect_tls(broker, client_context(pki))
    assert await api_versions_ok(client)


async def test_a_client_that_never_handshakes_is_closed_after_connections_max_idle_ms(start_broker, pki) -> None:
    broker = await start_tls(start_broker, pki.keystore_settings(), **{"connections.max.idle.ms": "300"})
    silent = await trio.open_tcp_stream("127.0.0.1", broker.port)
    assert await read_all(silent) == b""  # read_all gives up (fails) after 10 s
    client = await connect_tls(broker, client_context(pki))
    assert await api_versions_ok(client)


async def test_client_auth_required_refuses_clients_without_a_trusted_certificate(start_broker, pki) -> None:
    broker = await start_tls(start_broker, pki.mtls_settings())
    for context in (client_context(pki), client_context(pki, pki.rogue_client_cert, pki.rogue_client_key)):
        with pytest.raises(trio.BrokenResourceError):
            # TLS 1.3: the client's handshake ends before the server checks its certificate; the refusal comes
            # with the first read.
            client = await connect_tls(broker, context)
            await api_versions_ok(client)
    client = await connect_tls(broker, client_context(pki, pki.client_cert, pki.client_key))
    assert await api_versions_ok(client)


async def test_client_auth_requested_accepts_no_certificate_but_not_an_untrusted_one(start_broker, pki) -> None:
    broker = await start_tls(start_broker, {**pki.mtls_settings(), "ssl.client.auth": "requested"})
    assert await api_versions_ok(await connect_tls(broker, client_context(pki)))
    assert await api_versions_ok(await connect_tls(broker, client_context(pki, pki.client_cert, pki.client_key)))
    with pytest.raises(trio.BrokenResourceError):
        client = await connect_tls(broker, client_context(pki, pki.rogue_client_cert, pki.rogue_client_key))
        await api_versions_ok(client)


async def test_describe_configs_hides_the_ssl_secrets(start_broker, pki) -> None:
    broker = await start_tls(
        start_broker,
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.certificate.chain": pki.server_cert.read_text(),
            "ssl.keystore.key": pki.server_key_encrypted.read_text(),
            "ssl.key.password": "key-secret",
        },
    )
    client = await connect_tls(broker, client_context(pki))
    body = {
        "resources": [{"resource_type": 4, "resource_name": str(broker.node.node_id), "configuration_keys": None}],
        "include_synonyms": True,
        "include_documentation": False,
    }
    result = (await client.request(ApiKey.DESCRIBE_CONFIGS, 4, body)).results[0]
    entries = {entry.name: entry for entry in result.configs}
    for name in ("ssl.key.password", "ssl.keystore.key", "ssl.keystore.certificate.chain"):
        assert entries[name].is_sensitive
        assert entries[name].value is None
        assert all(synonym.value is None for synonym in entries[name].synonyms)
    assert entries["ssl.keystore.type"].value == "PEM"
    assert not entries["ssl.keystore.type"].is_sensitive
    assert "PRIVATE KEY" not in repr(result)
