"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), KIP-554: thin over
``ScramCredentialStore``, which holds Kafka's rules. A credential store that cannot be written (the data dir's file,
or on a cluster the etcd key every broker follows) answers KAFKA_STORAGE_ERROR for every user of the request and
changes nothing here."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
from oncelog.broker.etcd.client import EtcdError
from oncelog.broker.request import Request
from oncelog.broker.sasl.credentials import Deletion, ScramCredentialStore, Upsertion, encode_credentials
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.cluster.member import ClusterMember
    from oncelog.broker.services import Broker

#: How long an alteration on a cluster may take to come back through this broker's etcd watch.
SCRAM_APPLY_TIMEOUT_S = 30.0

log = structlog.get_logger(__name__)


async def handle_describe(broker: Broker, request: Request) -> dict:
    users = request.body.users
    names = None if users is None else [user.name for user in users]
    return {
        "throttle_time_ms": 0,
        "error_code": ErrorCode.NONE,
        "error_message": None,
        "results": broker.scram_credentials.describe(names),
    }


async def handle_alter(broker: Broker, request: Request) -> dict:
    body = request.body
    deletions = [Deletion(d.name, d.mechanism) for d in body.deletions]
    upsertions = [
        Upsertion(u.name, u.mechanism, u.iterations, bytes(u.salt), bytes(u.salted_password)) for u in body.upsertions
    ]
    try:
        if broker.member is None:
            results = broker.scram_credentials.alter(deletions, upsertions)
        else:
            results = await _alter_on_cluster(broker.member, broker.scram_credentials, deletions, upsertions)
    except (OSError, EtcdError) as exc:
        log.error("scram_credentials_write_failed", error=str(exc))
        names = dict.fromkeys([d.name for d in deletions] + [u.name for u in upsertions])
        results = [
            {"user": name, "error_code": ErrorCode.KAFKA_STORAGE_ERROR, "error_message": "Credentials not stored"}
            for name in names
        ]
    else:
        changed = [r["user"] for r in results if r["error_code"] == ErrorCode.NONE]
        if changed:
            log.info("scram_credentials_altered", users=changed)
    return {"throttle_time_ms": 0, "results": results}


async def _alter_on_cluster(
    member: ClusterMember, store: ScramCredentialStore, deletions: list[Deletion], upsertions: list[Upsertion]
) -> list[dict]:
    """On a cluster the credentials live in etcd: every broker takes them from its image (``LocalFollower``)."""
    updated, results = store.plan(deletions, upsertions)
    if updated is not None and not await member.store_scram_credentials(
        encode_credentials(updated), SCRAM_APPLY_TIMEOUT_S
    ):
        raise EtcdError("the credentials were stored in etcd but have not reached this broker yet")
    return results
