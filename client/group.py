"""Classic consumer-group membership (JoinGroup / SyncGroup / Heartbeat / LeaveGroup) for the ``consumer`` protocol.

Guarantees: after :meth:`GroupMember.ensure_active` returns, this member belongs to the current generation and holds
the assignment the leader computed with the first assignor every member supports (``range`` or ``roundrobin``);
a heartbeat task keeps the session alive and flags a rejoin on REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION or
UNKNOWN_MEMBER_ID; the next ``ensure_active`` then rejoins.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import anyio
from oncelog.client.assignors import ASSIGNORS, decode_assignment, encode_assignment
from oncelog.client.cluster import COORDINATOR_GROUP, Cluster
from oncelog.client.errors import KafkaConnectionError, KafkaTimeoutError, error_for
from oncelog.client.types import TopicPartition
from oncelog.protocol import ApiKey, ErrorCode
from oncelog.protocol.consumer_protocol import PROTOCOL_TYPE, decode_subscription, encode_subscription

SESSION_TIMEOUT_MS = 45000  # session.timeout.ms, Kafka default 45000
HEARTBEAT_INTERVAL_MS = 3000  # heartbeat.interval.ms, Kafka default 3000
MAX_POLL_INTERVAL_MS = 300000  # max.poll.interval.ms, Kafka default 300000 (the rebalance timeout)
_COORDINATOR_ERRORS = frozenset(
    {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS}
)
_REJOIN_ERRORS = frozenset(
    {
        ErrorCode.REBALANCE_IN_PROGRESS,
        ErrorCode.ILLEGAL_GENERATION,
        ErrorCode.UNKNOWN_MEMBER_ID,
        ErrorCode.FENCED_INSTANCE_ID,
    }
)


class GroupMember:
    def __init__(
        self,
        cluster: Cluster,
        group_id: str,
        *,
        assignors: Sequence[str] = ("range", "roundrobin"),
        session_timeout_ms: int = SESSION_TIMEOUT_MS,
        heartbeat_interval_ms: int = HEARTBEAT_INTERVAL_MS,
        rebalance_timeout_ms: int = MAX_POLL_INTERVAL_MS,
    ) -> None:
        for name in assignors:
            if name not in ASSIGNORS:
                raise ValueError(f"unknown partition assignor {name!r}")
        self.cluster = cluster
        self.group_id = group_id
        self.assignors = list(assignors)
        self.session_timeout_ms = session_timeout_ms
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.rebalance_timeout_ms = rebalance_timeout_ms
        self.member_id = ""
        self.generation_id = -1
        self.protocol: str | None = None
        self.assignment: list[TopicPartition] = []
        self.need_rejoin = True
        self._heartbeat_started = False
        self._closed = False

    async def _coordinator_request(self, key: ApiKey, body: dict[str, Any], **kw: Any) -> Any:
        deadline = time.monotonic() + self.cluster.request_timeout_ms / 1000
        while True:
            try:
                node = await self.cluster.coordinator(COORDINATOR_GROUP, self.group_id)
                resp = await self.cluster.request(node, key, body, **kw)
            except (KafkaConnectionError, KafkaTimeoutError):
                self.cluster.forget_coordinator(COORDINATOR_GROUP, self.group_id)
                resp = None
            if resp is not None:
                if resp.error_code not in _COORDINATOR_ERRORS:
                    return resp
                if resp.error_code != ErrorCode.COORDINATOR_LOAD_IN_PROGRESS:
                    self.cluster.forget_coordinator(COORDINATOR_GROUP, self.group_id)
            if time.monotonic() > deadline:
                raise KafkaTimeoutError(f"group coordinator of {self.group_id!r} unavailable")
            await anyio.sleep(self.cluster.retry_backoff_ms / 1000)

    async def ensure_active(self, topics: Sequence[str]) -> bool:
        """Join (or rejoin) when needed; returns True when the assignment may have changed."""
        if not self.need_rejoin:
            return False
        while True:
            if await self._join(sorted(set(topics))):
                break
        self.need_rejoin = False
        if not self._heartbeat_started:
            self._heartbeat_started = True
            self.cluster.task_group.start_soon(self._heartbeat_loop)
        return True

    async def _join(self, topics: list[str]) -> bool:
        """One JoinGroup + SyncGroup round; False when it has to be retried."""
        metadata = encode_subscription(topics)
        body = {
            "group_id": self.group_id,
            "session_timeout_ms": self.session_timeout_ms,
            "rebalance_timeout_ms": self.rebalance_timeout_ms,
            "member_id": self.member_id,
            "group_instance_id": None,
            "protocol_type": PROTOCOL_TYPE,
            "protocols": [{"name": name, "metadata": metadata} for name in self.assignors],
        }
        resp = await self._coordinator_request(ApiKey.JOIN_GROUP, body, timeout_ms=self.rebalance_timeout_ms + 5000)
        if resp.error_code == ErrorCode.MEMBER_ID_REQUIRED:
            self.member_id = resp.member_id
            return False
        if resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
            self.member_id = ""
            return False
        if resp.error_code == ErrorCode.REBALANCE_IN_PROGRESS:
            return False
        if resp.error_code:
            raise error_for(resp.error_code, f"JoinGroup {self.group_id}")
        self.member_id = resp.member_id
        self.generation_id = resp.generation_id
        self.protocol = resp.protocol_name
        assignments: list[dict[str, Any]] = []
        if resp.leader == resp.member_id:
            assignments = await self._assign(resp.protocol_name, resp.members)
        sync = {
            "group_id": self.group_id,
            "generation_id": self.generation_id,
            "member_id": self.member_id,
            "group_instance_id": None,
            "protocol_type": PROTOCOL_TYPE,
            "protocol_name": self.protocol,
            "assignments": assignments,
        }
        sresp = await self._coordinator_request(ApiKey.SYNC_GROUP, sync)
        if sresp.error_code in _REJOIN_ERRORS:
            if sresp.error_code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                self.member_id = "" if sresp.error_code == ErrorCode.UNKNOWN_MEMBER_ID else self.member_id
            return False
        if sresp.error_code:
            raise error_for(sresp.error_code, f"SyncGroup {self.group_id}")
        self.assignment = decode_assignment(sresp.assignment)
        return True

    async def _assign(self, protocol: str, members: Any) -> list[dict[str, Any]]:
        subscriptions = {m.member_id: decode_subscription(m.metadata) for m in members}
        wanted = sorted({t for topics in subscriptions.values() for t in topics})
        counts: dict[str, int] = {}
        if wanted:
            await self.cluster.refresh_metadata(wanted)
            for topic in wanted:
                info = self.cluster.topics.get(topic)
                if info is not None and info.error_code == 0:
                    counts[topic] = len(info.leaders)
        plan = ASSIGNORS[protocol](subscriptions, counts)
        return [{"member_id": m, "assignment": encode_assignment(tps)} for m, tps in plan.items()]

    async def _heartbeat_loop(self) -> None:
        while not self._closed:
            await anyio.sleep(self.heartbeat_interval_ms / 1000)
            if self.need_rejoin or self.generation_id < 0:
                continue
            body = {
                "group_id": self.group_id,
                "generation_id": self.generation_id,
                "member_id": self.member_id,
                "group_instance_id": None,
            }
            try:
                resp = await self._coordinator_request(ApiKey.HEARTBEAT, body)
            except (KafkaConnectionError, KafkaTimeoutError):
                continue
            if resp.error_code in _REJOIN_ERRORS:
                if resp.error_code == ErrorCode.UNKNOWN_MEMBER_ID:
                    self.member_id = ""
                self.need_rejoin = True

    def on_commit_error(self, code: int) -> None:
        """A commit failed with ``code``: rejoin when it says the generation moved on."""
        if code in _REJOIN_ERRORS:
            if code == ErrorCode.UNKNOWN_MEMBER_ID:
                self.member_id = ""
            self.need_rejoin = True

    async def leave(self) -> None:
        """LeaveGroup (best effort), so the group rebalances without waiting for the session timeout."""
        self._closed = True
        if not self.member_id:
            return
        body = {
            "group_id": self.group_id,
            "member_id": self.member_id,
            "members": [{"member_id": self.member_id, "group_instance_id": None}],
        }
        try:
            with anyio.move_on_after(5):
                await self._coordinator_request(ApiKey.LEAVE_GROUP, body)
        except (KafkaConnectionError, KafkaTimeoutError):
            pass
        self.member_id, self.generation_id = "", -1
