"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), KIP-554: thin over
``ScramCredentialStore``, which holds Kafka's rules. A credential store that cannot be written answers
KAFKA_STORAGE_ERROR for every user of the request and changes nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
from oncelog.broker.request import Request
from oncelog.broker.sasl.credentials import Deletion, Upsertion
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

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
        results = broker.scram_credentials.alter(deletions, upsertions)
    except OSError as exc:
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
