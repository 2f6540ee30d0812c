"""How a leader tells its followers' fetchers from other clients, before it decodes their requests.

The server rations the decoding of large requests (``server.Connection._in_worker``: one at a time broker-wide, each
followed by a rest nine times as long), against hostile clients. A follower of thousands of partitions sends such
requests all the time (a Fetch of 1,000 partitions is 33 KB), and would then replicate at a tenth of the broker's
time, queued behind whatever hostile client holds the ration. Its requests are exempt; a client must not get the
exemption by claiming to be a broker.

The Fetch's ``replica_id`` cannot decide: any client may set it (Kafka honours it only from principals granted
CLUSTER_ACTION, which an unauthenticated listener cannot tell apart), and it is in the body, whose decoding is what the
ration is for. The request header is decoded first, whatever the size; so a follower's fetcher names in its client id
its broker and its incarnation: the etcd lease its registration lives under (KIP-903's broker epoch,
``ClusterMember.incarnation``). Only brokers, which read etcd, know a broker's lease (no Kafka API answers it); the
client id is the form Kafka's fetchers use (``broker-<id>-fetcher-<n>``) with ``-incarnation-<lease>`` after it. A
request counts as a fetcher's when its client id names a broker registered under that lease now and it came on the
inter-broker listener (``RegisteredFetcherCheck``). A broker that registers again fetches under its new lease after
its next connection; until then its requests are rationed as anyone's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

_CLIENT_ID = re.compile(r"broker-(\d{1,10})-fetcher-(\d{1,10})-incarnation-(\d{1,20})")


def fetcher_client_id(node_id: int, leader: int, incarnation: int) -> str:
    """The client id of broker ``node_id``'s fetcher from ``leader`` while registered under lease ``incarnation``
    (0: not registered, or no etcd: Kafka's form, which claims nothing)."""
    kafka_form = f"broker-{node_id}-fetcher-{leader}"
    return f"{kafka_form}-incarnation-{incarnation}" if incarnation > 0 else kafka_form


def claimed_incarnation(client_id: str | None) -> tuple[int, int] | None:
    """(broker id, incarnation) a fetcher's client id claims; None for any other client id."""
    match = _CLIENT_ID.fullmatch(client_id or "")
    return (int(match[1]), int(match[3])) if match else None


class RegisteredFetcherCheck:
    """Whether a request is a registered follower's fetcher's: ``check(client_id, listener_name)``."""

    def __init__(self, broker_leases: Callable[[], Mapping[int, int]], inter_broker_listener: str) -> None:
        """``broker_leases()``: each registered broker's lease, as this broker's metadata image shows it now."""
        self._broker_leases = broker_leases
        self._inter_broker_listener = inter_broker_listener

    def __call__(self, client_id: str | None, listener_name: str) -> bool:
        if listener_name != self._inter_broker_listener:
            return False
        claimed = claimed_incarnation(client_id)
        return claimed is not None and self._broker_leases().get(claimed[0]) == claimed[1]
