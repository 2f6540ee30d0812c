"""Kafka's listener settings: ``listeners``, ``advertised.listeners`` and ``listener.security.protocol.map``.

A listener has a name, a security protocol, a host and a port (``NAME://HOST:PORT``). As in Kafka, the name maps to
its protocol through ``listener.security.protocol.map``, whose default maps each protocol's own name to it, so
``PLAINTEXT://...`` and ``SASL_PLAINTEXT://...`` need no map. An entry written without ``NAME://`` (the old
``--listen HOST:PORT`` form) is a ``PLAINTEXT`` listener; an advertised entry without a name belongs to the first
listener. Each listener's advertised address is its ``advertised.listeners`` entry, else its own (a wildcard host
advertised as 127.0.0.1, port 0 as the port actually bound). SSL and SASL_SSL listeners run over TLS
(``broker.tls``), SASL_PLAINTEXT and SASL_SSL ones authenticate with SASL (``broker.sasl``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from oncelog.broker.config import ConfigError, list_items

PLAINTEXT = "PLAINTEXT"
SSL = "SSL"
SASL_PLAINTEXT = "SASL_PLAINTEXT"
SASL_SSL = "SASL_SSL"
#: Kafka's SecurityProtocol values.
SECURITY_PROTOCOLS = (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)
#: The protocols that authenticate with SASL, and those that run over TLS.
SASL_PROTOCOLS = frozenset({SASL_PLAINTEXT, SASL_SSL})
TLS_PROTOCOLS = frozenset({SSL, SASL_SSL})
#: Kafka's default ``listener.security.protocol.map``: every protocol's name maps to itself.
DEFAULT_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)
_WILDCARD_HOSTS = ("0.0.0.0", "::", "")


@dataclass(frozen=True)
class Endpoint:
    """A host and port; ``name`` is the listener's name when the text had one."""

    host: str
    port: int
    name: str | None = None

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        """Parse ``HOST:PORT``, ``NAME://HOST:PORT`` or ``NAME://[v6]:PORT``; an empty host is the wildcard."""
        text = text.strip()
        name, sep, rest = text.partition("://")
        if not sep:
            name, rest = "", text
        host, sep, port = rest.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"expected [NAME://]HOST:PORT, got {text!r}")
        return cls(host.strip("[]") or "0.0.0.0", int(port), name.upper() or None)


@dataclass(frozen=True)
class Listener:
    """One listener: where it binds and how its connections authenticate."""

    name: str
    security_protocol: str
    host: str
    port: int

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in SASL_PROTOCOLS

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in TLS_PROTOCOLS

    @property
    def config_prefix(self) -> str:
        """Kafka's per-listener property prefix, ``listener.name.<lowercased name>.``."""
        return f"listener.name.{self.name.lower()}."


def parse_protocol_map(text: str) -> dict[str, str]:
    """``NAME:PROTOCOL,...`` -> {name: protocol}; raises ConfigError on an unknown protocol or a repeated name."""
    result: dict[str, str] = {}
    for item in list_items(text):
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name:
            raise ConfigError(f"Invalid value {text} for configuration listener.security.protocol.map")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"No enum constant for security protocol {protocol!r} (listener {name})")
        if name in result:
            raise ConfigError(f"Duplicate listener name {name} in listener.security.protocol.map")
        result[name] = protocol
    return result


def parse_listeners(listeners: str, protocol_map: Mapping[str, str]) -> list[Listener]:
    """The listeners of ``listeners``, in order; names and ports must be unique (port 0 may repeat) and every
    name must be in the protocol map, as Kafka requires."""
    result: list[Listener] = []
    for item in list_items(listeners):
        endpoint = Endpoint.parse(item)
        name = endpoint.name or PLAINTEXT
        protocol = protocol_map.get(name)
        if protocol is None:
            raise ConfigError(f"No security protocol defined for listener {name}")
        if any(existing.name == name for existing in result):
            raise ConfigError(f"Each listener must have a different name, listeners: {listeners}")
        if endpoint.port and any(existing.port == endpoint.port for existing in result):
            raise ConfigError(f"Each listener must have a different port, listeners: {listeners}")
        result.append(Listener(name, protocol, endpoint.host, endpoint.port))
    if not result:
        raise ConfigError("listeners must name at least one listener")
    return result


def parse_advertised(text: str, listeners: list[Listener]) -> dict[str, Endpoint]:
    """``advertised.listeners`` -> {listener name: address}; each name must be a listener's (an unnamed entry is
    the first listener's)."""
    names = {listener.name for listener in listeners}
    result: dict[str, Endpoint] = {}
    for item in list_items(text):
        endpoint = Endpoint.parse(item)
        name = endpoint.name or listeners[0].name
        if name not in names:
            raise ConfigError(
                f"advertised.listeners listener names must be equal to or a subset of the ones "
                f"defined in listeners, found {name}"
            )
        if name in result:
            raise ConfigError(f"Each advertised listener must have a different name, found {name} twice")
        if endpoint.host in _WILDCARD_HOSTS:
            raise ConfigError(f"advertised.listeners cannot use the nonroutable meta-address {endpoint.host}")
        result[name] = Endpoint(endpoint.host, endpoint.port, name)
    return result


def advertised_address(listener: Listener, advertised: Mapping[str, Endpoint], bound_port: int | None) -> Endpoint:
    """Where clients of ``listener`` are told to connect."""
    if listener.name in advertised:
        return advertised[listener.name]
    host = listener.host if listener.host not in _WILDCARD_HOSTS else "127.0.0.1"
    return Endpoint(host, bound_port if bound_port is not None else listener.port, listener.name)
