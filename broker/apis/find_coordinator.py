"""FindCoordinator (10): the coordinator of a group (key_type 0) or transactional id (key_type 1) is the leader of
the key's partition of ``__consumer_offsets`` / ``__transaction_state`` (on a single node: this node).

Like Kafka, the internal topic behind the coordinator is created on the first lookup; a partition without a leader,
or a topic that cannot be created yet (fewer live brokers than its replication factor), answers
COORDINATOR_NOT_AVAILABLE (retriable). v4+ looks up several keys at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from oncelog.broker.metadata import CONSUMER_OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
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
    entry = {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": ErrorCode.NONE, "error_message": None}
    if key_type == TRANSACTION:
        if not key:
            entry.update(error_code=ErrorCode.INVALID_REQUEST, error_message="Transactional id must not be empty")
            return entry
        ensure = broker.transactions.state_log.ensure_topic
        partition = (TRANSACTION_STATE_TOPIC, broker.transactions.state_log.partition_for(key))
    elif key_type == GROUP:
        ensure = broker.ensure_offsets_topic
        partition = (CONSUMER_OFFSETS_TOPIC, broker.groups.group_log.partition_for(key))
    else:
        entry.update(error_code=ErrorCode.INVALID_REQUEST, error_message=f"Unknown coordinator type {key_type}")
        return entry
    try:
        await ensure()
    except OSError as exc:  # not creatable now (fewer live brokers than its replication factor, etcd away)
        entry.update(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message=str(exc))
        return entry
    state = broker.cluster.partition(*partition)
    leader = next((b for b in broker.cluster.brokers(listener) if state and b.node_id == state.leader), None)
    if leader is None:
        entry.update(error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE, error_message="The coordinator is not available.")
    else:
        entry.update(node_id=leader.node_id, host=leader.host, port=leader.port)
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
