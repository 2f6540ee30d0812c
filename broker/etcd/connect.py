"""The ``etcd.connect`` setting: ``HOST:PORT[,HOST:PORT...][/ROOT]``.

The shape of Kafka's ``zookeeper.connect`` with its chroot: a comma-separated list of etcd client endpoints, then an
optional key prefix under which the whole cluster's metadata lives, so several clusters can share one etcd.
"""

from __future__ import annotations

from dataclasses import dataclass

#: etcd's registered client port (IANA), used when an endpoint names no port.
ETCD_DEFAULT_CLIENT_PORT = 2379


class EtcdConnectError(ValueError):
    """The ``etcd.connect`` value cannot be parsed; the message says which part is wrong."""


@dataclass(frozen=True)
class EtcdConnect:
    """Parsed ``etcd.connect``: base URLs of the endpoints, tried in order, and the key prefix of the cluster."""

    endpoints: tuple[str, ...]
    #: Every key the cluster writes starts with this; "/" when the setting names no root.
    root: str

    def key(self, *parts: str) -> str:
        """The full key of ``parts`` under the root: ``key("brokers", "1")`` -> ``/ROOT/brokers/1``."""
        return self.root.rstrip("/") + "/" + "/".join(parts)


def parse_etcd_connect(value: str) -> EtcdConnect:
    """Parse ``HOST:PORT[,HOST:PORT...][/ROOT]`` (an ``http://`` prefix on an endpoint is allowed and ignored)."""
    text = value.strip()
    if not text:
        raise EtcdConnectError("etcd.connect is empty; expected HOST:PORT[,HOST:PORT...][/ROOT]")
    hosts_part, slash, root_part = text.partition("/")
    if hosts_part.endswith(("http:", "https:")):
        raise EtcdConnectError(f"etcd.connect {value!r}: give HOST:PORT without a scheme")
    endpoints = tuple(_endpoint(item, value) for item in hosts_part.split(","))
    root = "/" + root_part.strip("/") if slash else "/"
    if "//" in root:
        raise EtcdConnectError(f"etcd.connect {value!r}: the root {root!r} has an empty path segment")
    return EtcdConnect(endpoints=endpoints, root=root)


def _endpoint(item: str, whole: str) -> str:
    host, colon, port = item.strip().rpartition(":")
    if not colon:
        host, port = item.strip(), str(ETCD_DEFAULT_CLIENT_PORT)
    if not host:
        raise EtcdConnectError(f"etcd.connect {whole!r}: an endpoint has no host")
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise EtcdConnectError(f"etcd.connect {whole!r}: {item.strip()!r} has no valid port")
    return f"http://{host}:{int(port)}"
