"""TxnOffsetCommit (28): offsets that commit with a transaction (pending until its marker)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.apis.offset_commit import by_topic, offsets_of
from oncelog.broker.clock import now_ms
from oncelog.broker.request import Request
from oncelog.broker.txn.errors import fencing_error
from oncelog.protocol import ApiKey

if TYPE_CHECKING:
    from oncelog.broker.services import Broker


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    errors = await broker.groups.txn_commit_offsets(
        body.transactional_id,
        body.group_id,
        body.producer_id,
        body.producer_epoch,
        body.generation_id,
        body.member_id,
        body.group_instance_id,
        offsets_of(body.topics, now_ms()),
        fencing_error(ApiKey.TXN_OFFSET_COMMIT, request.version),
    )
    return {"throttle_time_ms": 0, "topics": by_topic(errors)}
