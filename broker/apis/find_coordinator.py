"""FindCoordinator (10): this node coordinates every group (key_type 0) and transactional id (key_type 1).

Like Kafka, the internal topic behind the coordinator (``__consumer_offsets`` / ``__transaction_state``) is created
on the first lookup. v4+ looks up several keys at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.request import Request
from oncelog.protocol import ErrorCode

if TYPE_CHECKING:
    from oncelog.broker.services import Broker

#: Kafka's FindCoordinatorRequest.CoordinatorType.
GROUP = 0
TRANSACTION = 1
#: The first version that looks up a list of keys (KIP-699).
BATCHED_VERSION = 4


async def _lookup(broker: Broker, key: str, key_type: int, listener: str | None) -> dict:
    advertised = broker.advertised_for(listener)
    entry = {
        "key": key,
        "node_id": broker.node_id,
        "host": advertised.host,
        "port": advertised.port,
        "error_code": ErrorCode.NONE,
        "error_message": None,
    }
    if key_type == TRANSACTION:
        if not key:
            entry.update(error_code=ErrorCode.INVALID_REQUEST, error_message="Transactional id must not be empty")
        else:
            await broker.transactions.state_log.ensure_topic()
    elif key_type == GROUP:
        await broker.ensure_offsets_topic()
    else:
        entry.update(error_code=ErrorCode.INVALID_REQUEST, error_message=f"Unknown coordinator type {key_type}")
    if entry["error_code"] != ErrorCode.NONE:
        entry.update(node_id=-1, host="", port=-1)
    return entry


async def handle(broker: Broker, request: Request) -> dict:
    body = request.body
    if request.version >= BATCHED_VERSION:
        return {
            "throttle_time_ms": 0,
            "coordinators": [await _lookup(broker, k, body.key_type, request.listener) for k in body.coordinator_keys],
        }
    entry = await _lookup(broker, body.key, body.key_type, request.listener)
    del entry["key"]  # v0-3 answer for the one key asked; only v4+'s coordinators name theirs
    return {"throttle_time_ms": 0, **entry}
