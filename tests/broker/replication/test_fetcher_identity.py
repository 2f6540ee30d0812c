"""A follower's fetcher proves it is one by its client id: its broker and that broker's registration lease, checked
against the image on the inter-broker listener only; nothing else a client can send passes."""

from __future__ import annotations

import pytest
from oncelog.broker.replication.fetcher_identity import RegisteredFetcherCheck, claimed_incarnation, fetcher_client_id

LEASES = {2: 7587891234567890123}
check = RegisteredFetcherCheck(lambda: LEASES, "REPLICATION")


def test_a_registered_fetcher_passes_on_the_inter_broker_listener() -> None:
    client_id = fetcher_client_id(2, 1, LEASES[2])
    assert claimed_incarnation(client_id) == (2, LEASES[2])
    assert check(client_id, "REPLICATION")
    assert not check(client_id, "CLIENTS")  # another listener: not from a broker, whatever it claims


@pytest.mark.parametrize(
    "client_id",
    [
        fetcher_client_id(2, 1, 0),  # Kafka's form (a broker without etcd): claims nothing
        "broker-2-fetcher-1",
        fetcher_client_id(2, 1, LEASES[2] + 1),  # not the lease broker 2 is registered under now
        fetcher_client_id(3, 1, LEASES[2]),  # broker 3 is not registered
        fetcher_client_id(2, 1, LEASES[2]) + "x",
        "x" + fetcher_client_id(2, 1, LEASES[2]),
        None,
        "",
    ],
)
def test_nothing_else_passes(client_id: str | None) -> None:
    assert not check(client_id, "REPLICATION")
