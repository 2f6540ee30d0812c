"""The SSL listener's context from Kafka's ssl.* properties: what loads, and the start-up errors of what cannot."""

from __future__ import annotations

import ssl
import subprocess
from pathlib import Path

import pytest
from oncelog.broker.config import BrokerConfig, ConfigError, read_properties_file
from oncelog.broker.node import BrokerNode
from oncelog.broker.tls import pem_text, server_context
from support.broker import default_command
from support.tls import KEY_PASSWORD, STORE_PASSWORD, Pki, make_pki

SSL_LISTENER = "SSL://127.0.0.1:9093"
#: SASL settings a SASL_SSL / SASL_PLAINTEXT listener needs to start (the TLS ones are the test's).
SASL = {"sasl.enabled.mechanisms": "SCRAM-SHA-256"}


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def context(**settings: str) -> ssl.SSLContext | None:
    return server_context(BrokerConfig.from_sources({"listeners": SSL_LISTENER, **settings}))


def ssl_settings(**settings: str) -> dict[str, str]:
    return {k.replace("_", "."): v for k, v in settings.items()}


def refused(match: str, **settings: str) -> None:
    with pytest.raises(ConfigError, match=match):
        context(**ssl_settings(**settings))


def node(tmp_path: Path, listeners: str, **settings: str) -> BrokerNode:
    return BrokerNode(BrokerConfig.from_sources({"listeners": listeners, "log.dirs": str(tmp_path), **settings}))


def test_only_a_broker_with_a_tls_listener_builds_a_context(tmp_path: Path) -> None:
    assert node(tmp_path, "PLAINTEXT://127.0.0.1:9092,SASL_PLAINTEXT://127.0.0.1:9093", **SASL).ssl_contexts == {}
    for listeners in (SSL_LISTENER, "SASL_SSL://127.0.0.1:9094"):
        with pytest.raises(ConfigError, match="needs a keystore"):
            node(tmp_path, listeners, **SASL)


def test_a_listeners_own_ssl_settings_replace_the_brokers(tmp_path: Path, pki) -> None:
    # Kafka's listener.name.<listener>.ssl.*: INTERNAL requires client certificates, EXTERNAL keeps the defaults.
    two = node(
        tmp_path,
        "INTERNAL://127.0.0.1:9093,EXTERNAL://127.0.0.1:9094",
        **{
            "listener.security.protocol.map": "INTERNAL:SSL,EXTERNAL:SSL",
            **pki.keystore_settings(),
            "listener.name.internal.ssl.client.auth": "required",
            "listener.name.internal.ssl.truststore.type": "PEM",
            "listener.name.internal.ssl.truststore.location": str(pki.ca),
        },
    )
    assert {name: ctx.verify_mode for name, ctx in two.ssl_contexts.items()} == {
        "INTERNAL": ssl.CERT_REQUIRED,
        "EXTERNAL": ssl.CERT_NONE,
    }
    with pytest.raises(ConfigError, match=r"listener\.name\.internal\.ssl\.client\.auth"):
        node(tmp_path, "INTERNAL://127.0.0.1:9093", **{
            "listener.security.protocol.map": "INTERNAL:SSL", **pki.keystore_settings(),
            "listener.name.internal.ssl.client.auth": "sometimes"})  # fmt: skip


def test_pem_keystore_file_with_key_and_chain(pki) -> None:
    ctx = context(**pki.keystore_settings())
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode == ssl.CERT_NONE
    assert (ctx.minimum_version, ctx.maximum_version) == (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)


def test_pem_keystore_inline_with_an_encrypted_key(pki) -> None:
    inline = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": pki.server_cert.read_text(),
        "ssl.keystore.key": pki.server_key_encrypted.read_text(),
    }
    assert context(**inline, **{"ssl.key.password": KEY_PASSWORD}) is not None
    with pytest.raises(ConfigError, match=r"ssl\.key\.password"):
        context(**inline, **{"ssl.key.password": "wrong"})
    with pytest.raises(ConfigError, match=r"ssl\.key\.password"):
        context(**inline)  # no password: an error, not a prompt on the terminal


def test_inline_pem_from_a_properties_file_with_continued_lines(pki, tmp_path) -> None:
    # KIP-651's layout: the PEM text on continued lines, which Java's properties format joins with single spaces.
    def continued(text: str) -> str:
        return " \\\n    ".join(line for line in text.splitlines() if line)

    properties = tmp_path / "server.properties"
    properties.write_text(
        f"listeners={SSL_LISTENER}\n"
        "ssl.keystore.type=PEM\n"
        f"ssl.keystore.certificate.chain={continued(pki.server_cert.read_text())}\n"
        f"ssl.keystore.key={continued(pki.server_key.read_text())}\n"
        "# a comment ending in a backslash does not continue \\\n"
        "ssl.client.auth=required\n"
        "ssl.truststore.type=PEM\n"
        f"ssl.truststore.certificates={continued(pki.ca.read_text())}\n"
    )
    values = read_properties_file(properties)
    assert values["ssl.keystore.key"].startswith("-----BEGIN PRIVATE KEY----- ")
    assert values["ssl.client.auth"] == "required"
    ctx = server_context(BrokerConfig.from_sources(values))
    assert ctx is not None
    assert ctx.verify_mode == ssl.CERT_REQUIRED
    assert [cert["subject"] for cert in ctx.get_ca_certs()] == [((("commonName", "oncelog test CA"),),)]


def test_pem_text_rewraps_joined_blocks(pki) -> None:
    text = pki.server_cert.read_text()
    assert pem_text(" ".join(text.split())) == text
    assert pem_text(text) == text


def test_pkcs12_keystore_and_truststore(pki) -> None:
    ctx = context(
        **{
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(pki.server_p12),
            "ssl.keystore.password": STORE_PASSWORD,
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(pki.ca_p12),
            "ssl.truststore.password": STORE_PASSWORD,
            "ssl.client.auth": "requested",
        }
    )
    assert ctx is not None
    assert ctx.verify_mode == ssl.CERT_OPTIONAL
    assert len(ctx.get_ca_certs()) == 1
    refused(
        "wrong ssl.keystore.password",
        ssl_keystore_type="PKCS12",
        ssl_keystore_location=str(pki.server_p12),
        ssl_keystore_password="wrong",
    )
    refused(
        "ssl.keystore.password is not",
        ssl_keystore_type="PKCS12",
        ssl_keystore_location=str(pki.server_p12),
    )


def test_jks_and_unknown_store_types_are_refused_naming_the_supported_ones(pki) -> None:
    refused("ssl.keystore.type=JKS .* supported types: PEM, PKCS12", ssl_keystore_location=str(pki.server_p12),
            ssl_keystore_password=STORE_PASSWORD)  # fmt: skip
    refused(
        "ssl.truststore.type=JKS .* supported types: PEM, PKCS12",
        **ssl_settings(**pki.keystore_settings()),
        ssl_client_auth="required",
        ssl_truststore_location=str(pki.ca),
    )


def test_kafka_rules_on_combinations(pki) -> None:
    keystore = ssl_settings(**pki.keystore_settings())
    refused("needs a keystore", ssl_keystore_type="PEM")
    refused("ssl.keystore.password cannot be set with PEM", **keystore, ssl_keystore_password="x")
    refused("ssl.keystore.certificate.chain is not set", ssl_keystore_type="PEM",
            ssl_keystore_key=pki.server_key.read_text())  # fmt: skip
    refused("both ssl.keystore.location and ssl.keystore.key", **keystore, ssl_keystore_key=pki.server_key.read_text(),
            ssl_keystore_certificate_chain=pki.server_cert.read_text())  # fmt: skip
    refused("cannot read", ssl_keystore_type="PEM", ssl_keystore_location=str(pki.directory / "missing.pem"))
    refused("ssl.truststore.password cannot be set with PEM", **keystore, ssl_client_auth="required",
            ssl_truststore_type="PEM", ssl_truststore_location=str(pki.ca), ssl_truststore_password="x")  # fmt: skip
    refused("no usable CA certificate", **keystore, ssl_client_auth="required", ssl_truststore_type="PEM",
            ssl_truststore_location=str(pki.server_key))  # fmt: skip
    refused("ssl.client.auth", **keystore, ssl_client_auth="sometimes")


def test_a_key_that_does_not_match_its_certificate_is_refused(pki) -> None:
    refused(
        "cannot load the private key",
        ssl_keystore_type="PEM",
        ssl_keystore_certificate_chain=pki.server_cert.read_text(),
        ssl_keystore_key=pki.client_key.read_text(),
    )


def test_enabled_protocols_become_a_version_range(pki) -> None:
    keystore = ssl_settings(**pki.keystore_settings())
    only13 = context(**keystore, **{"ssl.enabled.protocols": "TLSv1.3"})
    assert only13 is not None
    assert (only13.minimum_version, only13.maximum_version) == (ssl.TLSVersion.TLSv1_3, ssl.TLSVersion.TLSv1_3)
    refused("consecutive", **keystore, ssl_enabled_protocols="TLSv1.1,TLSv1.3")
    refused("ssl.enabled.protocols", **keystore, ssl_enabled_protocols="SSLv3")
    refused("ssl.cipher.suites is not supported", **keystore, ssl_cipher_suites="TLS_AES_128_GCM_SHA256")


def test_the_broker_command_reports_a_bad_ssl_setting_and_exits(tmp_path) -> None:
    proc = subprocess.run(
        [*default_command(), "--data-dir", str(tmp_path / "data"),
         "--listen", "SSL://127.0.0.1:0", "--set", f"ssl.keystore.location={Path(tmp_path) / 'none.jks'}"],
        capture_output=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    assert b"ssl.keystore.type=JKS cannot be read" in proc.stderr
    assert b"Traceback" not in proc.stderr
