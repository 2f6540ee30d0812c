"""Server-side TLS of the ``SSL`` and ``SASL_SSL`` listeners: an ``ssl.SSLContext`` built from Kafka's ``ssl.*``
properties (a listener's own ``listener.name.<listener>.ssl.*`` applied first: ``BrokerConfig.for_listener``).

Guaranteed: ``server_context`` returns a context whose certificate, key and trust anchors are already loaded; every
misconfiguration (a missing or unreadable store, a wrong password, a key that does not match its certificate, a store
type Python cannot read) raises ``ConfigError`` naming the property, at start-up, never on a client's first
connection.

Kafka's rules (``DefaultSslEngineFactory``, KIP-651 for PEM):

* ``ssl.keystore.type`` PEM: either ``ssl.keystore.location``, one PEM file holding the private key and the certificate
  chain, or the PEM text itself in ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key``; an encrypted key's
  password is ``ssl.key.password``; ``ssl.keystore.password`` must not be set.
* ``ssl.keystore.type`` PKCS12: ``ssl.keystore.location`` and ``ssl.keystore.password`` (read with ``cryptography``).
* JKS (Kafka's default type) cannot be read from Python: refused with the supported types named.
* ``ssl.truststore.type`` PEM (``ssl.truststore.location`` or ``ssl.truststore.certificates``, no password) or PKCS12
  (location, optional password): the CAs client certificates are checked against when ``ssl.client.auth`` is
  ``requested`` or ``required``; without a truststore the system's CAs are used, as Java's default trust store.
* ``ssl.enabled.protocols`` (default ``TLSv1.2,TLSv1.3``) becomes OpenSSL's minimum and maximum version, so it must
  name a contiguous range of versions.
"""

from __future__ import annotations

import os
import re
import secrets
import ssl
import tempfile
from collections.abc import Callable
from pathlib import Path

from oncelog.broker.config import BrokerConfig, ConfigError, list_items

#: Key and trust store types that can be read (Kafka's ``ssl.keystore.type`` / ``ssl.truststore.type`` values).
STORE_TYPES = ("PEM", "PKCS12")
#: ``ssl.enabled.protocols`` names, oldest first, and the OpenSSL versions they are.
_PROTOCOL_VERSIONS = {
    "TLSv1": ssl.TLSVersion.TLSv1,
    "TLSv1.1": ssl.TLSVersion.TLSv1_1,
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
#: ``ssl.client.auth`` -> what the server asks of the client's certificate (Kafka's SslClientAuth).
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}


def server_context(config: BrokerConfig) -> ssl.SSLContext:
    """A server context from ``config``'s ``ssl.*`` properties; raises ConfigError when they cannot be used."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    # Renegotiation would let a client make the broker's writer wait for reads (TLS 1.3 has none anyway).
    context.options |= ssl.OP_NO_RENEGOTIATION
    context.minimum_version, context.maximum_version = _protocol_range(config.get_str("ssl.enabled.protocols"))
    if config.get_str("ssl.cipher.suites"):
        raise ConfigError(
            "ssl.cipher.suites is not supported: OpenSSL names suites differently from Java and Python cannot "
            "restrict TLS 1.3 suites; leave it empty (OpenSSL's defaults) or narrow ssl.enabled.protocols"
        )
    _load_keystore(context, config)
    context.verify_mode = _CLIENT_AUTH[config.get_str("ssl.client.auth")]
    if context.verify_mode != ssl.CERT_NONE:
        _load_truststore(context, config)
    return context


def _protocol_range(text: str) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    names = list_items(text)
    unknown = [name for name in names if name not in _PROTOCOL_VERSIONS]
    if not names or unknown:
        raise ConfigError(
            f"Invalid value {text} for configuration ssl.enabled.protocols: "
            f"expected a list of {', '.join(_PROTOCOL_VERSIONS)}"
        )
    order = list(_PROTOCOL_VERSIONS)
    positions = sorted({order.index(name) for name in names})
    if positions != list(range(positions[0], positions[-1] + 1)):
        raise ConfigError(f"ssl.enabled.protocols must name consecutive TLS versions (OpenSSL takes a range): {text}")
    return _PROTOCOL_VERSIONS[order[positions[0]]], _PROTOCOL_VERSIONS[order[positions[-1]]]


def _store_type(config: BrokerConfig, name: str) -> str:
    kind = config.get_str(name).upper()
    if kind not in STORE_TYPES:
        raise ConfigError(
            f"{name}={config.get_str(name)} cannot be read by this broker (Java keystores need a JVM); "
            f"supported types: {', '.join(STORE_TYPES)} (convert with: keytool -importkeystore "
            "-deststoretype PKCS12)"
        )
    return kind


def _load_keystore(context: ssl.SSLContext, config: BrokerConfig) -> None:
    location = config.get_str("ssl.keystore.location")
    store_password = config.get_str("ssl.keystore.password")
    key_password = config.get_str("ssl.key.password")
    chain = config.get_str("ssl.keystore.certificate.chain")
    key = config.get_str("ssl.keystore.key")
    if not (location or chain or key):
        raise ConfigError(
            "a TLS listener (SSL, SASL_SSL) needs a keystore: set ssl.keystore.location (or, for PEM, "
            "ssl.keystore.certificate.chain and ssl.keystore.key)"
        )
    kind = _store_type(config, "ssl.keystore.type")
    if chain or key:
        if kind != "PEM":
            raise ConfigError(
                f"ssl.keystore.key and ssl.keystore.certificate.chain need ssl.keystore.type=PEM, not {kind}"
            )
        if not (chain and key):
            missing = "ssl.keystore.key" if chain else "ssl.keystore.certificate.chain"
            raise ConfigError(f"{missing} is not set: the PEM keystore needs both key and certificate chain")
        if location:
            raise ConfigError("both ssl.keystore.location and ssl.keystore.key are set: choose one")
        if store_password:
            raise ConfigError("ssl.keystore.password cannot be set with PEM keystores: use ssl.key.password")
        _load_chain_from_text(context, pem_text(chain), pem_text(key), key_password, "ssl.keystore.key")
        return
    path = _readable(location, "ssl.keystore.location")
    if kind == "PEM":
        if store_password:
            raise ConfigError("ssl.keystore.password cannot be set with PEM keystores: use ssl.key.password")
        _load_chain(context, str(path), None, key_password, f"ssl.keystore.location {path}")
        return
    if not store_password:
        raise ConfigError("ssl.keystore.location is set but ssl.keystore.password is not")
    chain_pem, key_pem, one_time = _pkcs12_as_pem(path, store_password, key_password)
    _load_chain_from_text(context, chain_pem, key_pem, one_time, f"ssl.keystore.location {path}")


def _load_truststore(context: ssl.SSLContext, config: BrokerConfig) -> None:
    location = config.get_str("ssl.truststore.location")
    certificates = config.get_str("ssl.truststore.certificates")
    password = config.get_str("ssl.truststore.password")
    if not (location or certificates):
        if password:
            raise ConfigError("ssl.truststore.password is set but ssl.truststore.location is not")
        context.load_default_certs(ssl.Purpose.CLIENT_AUTH)
        return
    kind = _store_type(config, "ssl.truststore.type")
    if certificates:
        if kind != "PEM":
            raise ConfigError(f"ssl.truststore.certificates needs ssl.truststore.type=PEM, not {kind}")
        if location:
            raise ConfigError("both ssl.truststore.location and ssl.truststore.certificates are set: choose one")
        pem, source = pem_text(certificates), "ssl.truststore.certificates"
    else:
        path = _readable(location, "ssl.truststore.location")
        source = f"ssl.truststore.location {path}"
        if kind == "PEM":
            if password:
                raise ConfigError("ssl.truststore.password cannot be set with PEM truststores")
            pem = path.read_text(errors="replace")
        else:
            pem = _pkcs12_certificates(path, password)
    try:
        context.load_verify_locations(cadata=pem)
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(f"{source}: no usable CA certificate ({exc})") from None


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


def pem_text(value: str) -> str:
    """PEM text as OpenSSL reads it from an inline property: a properties file's continued lines arrive joined,
    ``-----BEGIN X----- MIIE... -----END X-----`` on one line (KIP-651's example); each block's base64 body is
    put back on lines of 64 characters. Blocks with headers (legacy encrypted keys) are kept as they are."""

    def rewrap(match: re.Match[str]) -> str:
        label, body = match.group(1), match.group(2)
        if ":" in body:
            return match.group(0)
        flat = "".join(body.split())
        lines = [flat[i : i + 64] for i in range(0, len(flat), 64)]
        return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]) + "\n"

    return "".join(rewrap(match) for match in _PEM_BLOCK.finditer(value)) or value


def _readable(location: str, name: str) -> Path:
    path = Path(location)
    try:
        path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{name}: cannot read {location}: {exc.strerror or exc}") from None
    return path


def _password_callback(password: str) -> Callable[[], bytes]:
    # Always a callback: without one, OpenSSL would ask for an encrypted key's password on the terminal.
    return lambda: password.encode()


def _load_chain(context: ssl.SSLContext, certfile: str, keyfile: str | None, password: str, source: str) -> None:
    try:
        context.load_cert_chain(certfile, keyfile, password=_password_callback(password))
    except (ssl.SSLError, ValueError) as exc:
        raise ConfigError(
            f"{source}: cannot load the private key and certificate chain ({exc}); the key must match the first "
            "certificate, and an encrypted key needs ssl.key.password"
        ) from None


def _load_chain_from_text(context: ssl.SSLContext, chain: str, key: str, password: str, source: str) -> None:
    """Load PEM text: OpenSSL reads chains from files only, so it goes through files in a private (0700) temporary
    directory, removed at once; a key written there is encrypted unless it came in unencrypted."""
    with tempfile.TemporaryDirectory(prefix="oncelog-tls-") as directory:
        chain_file, key_file = os.path.join(directory, "chain.pem"), os.path.join(directory, "key.pem")
        for path, text in ((chain_file, chain), (key_file, key)):
            descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "w") as file:
                file.write(text)
        _load_chain(context, chain_file, key_file, password, source)


def _pkcs12_as_pem(path: Path, store_password: str, key_password: str) -> tuple[str, str, str]:
    """A PKCS12 keystore's certificate chain and key as PEM (the key encrypted with a fresh one-time password,
    returned third). The store is opened with ``ssl.keystore.password``, else ``ssl.key.password``."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    data = path.read_bytes()
    loaded = None
    for password in dict.fromkeys(p for p in (store_password, key_password) if p):
        try:
            loaded = pkcs12.load_key_and_certificates(data, password.encode())
            break
        except ValueError:
            continue
    if loaded is None:
        raise ConfigError(f"ssl.keystore.location {path}: not a PKCS12 keystore, or wrong ssl.keystore.password")
    key, certificate, extra = loaded
    if key is None or certificate is None:
        raise ConfigError(f"ssl.keystore.location {path}: the PKCS12 keystore holds no private key with a certificate")
    one_time = secrets.token_urlsafe(24)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(one_time.encode()),
    ).decode()
    chain_pem = "".join(cert.public_bytes(serialization.Encoding.PEM).decode() for cert in (certificate, *extra))
    return chain_pem, key_pem, one_time


def _pkcs12_certificates(path: Path, password: str) -> str:
    """Every certificate of a PKCS12 truststore, as PEM text."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    try:
        store = pkcs12.load_pkcs12(path.read_bytes(), password.encode() if password else None)
    except ValueError:
        raise ConfigError(
            f"ssl.truststore.location {path}: not a PKCS12 truststore, or wrong ssl.truststore.password"
        ) from None
    certificates = [c.certificate for c in store.additional_certs]
    if store.cert is not None:
        certificates.insert(0, store.cert.certificate)
    return "".join(cert.public_bytes(serialization.Encoding.PEM).decode() for cert in certificates)
