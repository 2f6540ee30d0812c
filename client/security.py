"""How the bundled client secures its broker connections, under librdkafka's property names (as keyword arguments
with underscores): ``connection_security`` turns them into a ``ConnectionSecurity``.

``security_protocol``: ``PLAINTEXT`` (default), ``SSL``, ``SASL_PLAINTEXT`` or ``SASL_SSL``. SASL's settings
(``sasl_mechanism``, ``sasl_username``, ``sasl_password``) are described in ``client.sasl``. For SSL and SASL_SSL:
``ssl_ca_location`` (PEM file of the CAs the broker's certificate must chain to; the system's CAs when unset),
``ssl_certificate_location`` + ``ssl_key_location`` (+ ``ssl_key_password``) for a client certificate (mTLS), and
``ssl_endpoint_identification_algorithm``: ``https`` (default, as librdkafka >= 2.0 and Java: the broker's
certificate must name the host dialled) or ``none``.

Guaranteed: ``client_ssl_context`` returns None for a protocol without TLS and otherwise a context with every file
already loaded; a bad setting or unreadable file raises ``ConfigError`` when the client is constructed, not at its
first connection.
"""

from __future__ import annotations

import ssl
from collections.abc import MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oncelog.client.errors import ConfigError
from oncelog.client.sasl import SaslSettings, sasl_settings

#: Kafka's security protocols, and those of them that run over TLS.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
TLS_PROTOCOLS = ("SSL", "SASL_SSL")
_SSL_SETTINGS = (
    "ssl_ca_location",
    "ssl_certificate_location",
    "ssl_key_location",
    "ssl_key_password",
    "ssl_endpoint_identification_algorithm",
)
_SASL_SETTINGS = ("sasl_mechanism", "sasl_username", "sasl_password")
#: The keyword arguments ``connection_security`` takes; ``pop_security`` removes them from a client's settings.
SECURITY_SETTINGS = ("security_protocol", *_SSL_SETTINGS, *_SASL_SETTINGS)


@dataclass(frozen=True)
class ConnectionSecurity:
    """TLS (None: plaintext) and SASL (None: no authentication) of every connection a client opens."""

    ssl_context: ssl.SSLContext | None = None
    sasl: SaslSettings | None = None


PLAINTEXT = ConnectionSecurity()


def connection_security(*, security_protocol: str = "PLAINTEXT", **settings: Any) -> ConnectionSecurity:
    """Check and load ``SECURITY_SETTINGS`` (see the module docstring); raises ConfigError naming the property."""
    unknown = sorted(set(settings) - set(SECURITY_SETTINGS))
    if unknown:
        raise TypeError(f"unknown security settings {unknown}")
    ssl_settings = {name: settings[name] for name in _SSL_SETTINGS if name in settings}
    sasl_kwargs = {name: settings[name] for name in _SASL_SETTINGS if name in settings}
    return ConnectionSecurity(
        client_ssl_context(security_protocol=security_protocol, **ssl_settings),
        sasl_settings(security_protocol, **sasl_kwargs),
    )


def client_ssl_context(
    *,
    security_protocol: str = "PLAINTEXT",
    ssl_ca_location: str | None = None,
    ssl_certificate_location: str | None = None,
    ssl_key_location: str | None = None,
    ssl_key_password: str | None = None,
    ssl_endpoint_identification_algorithm: str = "https",
) -> ssl.SSLContext | None:
    """The TLS context of connections to brokers, or None for plaintext ones (see the module docstring)."""
    protocol = security_protocol.upper()
    if protocol not in SECURITY_PROTOCOLS:
        choices = ", ".join(SECURITY_PROTOCOLS)
        raise ConfigError(f"security.protocol must be one of {choices}; got {security_protocol!r}")
    if protocol not in TLS_PROTOCOLS:
        return None
    if ssl_endpoint_identification_algorithm.lower() not in ("https", "none", ""):
        raise ConfigError(
            "ssl.endpoint.identification.algorithm must be https or none; "
            f"got {ssl_endpoint_identification_algorithm!r}"
        )
    try:
        context = ssl.create_default_context(cafile=ssl_ca_location)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"ssl.ca.location {ssl_ca_location}: {exc}") from None
    context.check_hostname = ssl_endpoint_identification_algorithm.lower() == "https"
    if ssl_certificate_location or ssl_key_location:
        if not ssl_certificate_location:
            raise ConfigError("ssl.key.location is set but ssl.certificate.location is not")
        password = (ssl_key_password or "").encode()
        try:
            context.load_cert_chain(ssl_certificate_location, ssl_key_location, password=lambda: password)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"ssl.certificate.location / ssl.key.location: cannot load the client certificate and key ({exc})"
            ) from None
    return context


def pop_security(settings: MutableMapping[str, Any]) -> ConnectionSecurity:
    """Take the security settings out of a client's keyword arguments and check and load them."""
    return connection_security(**{name: settings.pop(name) for name in SECURITY_SETTINGS if name in settings})


def read_command_config(path: str | Path) -> dict[str, str]:
    """The security settings of a Kafka-style properties file (``security.protocol=SASL_SSL``, ``ssl.ca.location=...``,
    as Kafka's tools take with ``--command-config``), as keyword arguments; any other property raises ConfigError."""
    settings: dict[str, str] = {}
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"--command-config {path}: {exc.strerror or exc}") from None
    for line in text.splitlines():
        stripped = line.strip()
        if not stripped or stripped[0] in "#!":
            continue
        name, sep, value = stripped.partition("=")
        keyword = name.strip().replace(".", "_")
        if not sep or keyword not in SECURITY_SETTINGS:
            raise ConfigError(
                f"--command-config {path}: unsupported line {line!r} (supported: "
                f"{', '.join(s.replace('_', '.') for s in SECURITY_SETTINGS)})"
            )
        settings[keyword] = value.strip()
    return settings
