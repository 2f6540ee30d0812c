"""What a client knows about the cluster: bootstrap list, broker connections, metadata cache, coordinators.

Guarantees: one connection per broker, (re)opened lazily with exponential backoff between failed attempts
(reconnect.backoff.ms .. reconnect.backoff.max.ms); metadata is refreshed on demand, when older than
metadata.max.age.ms, or after :meth:`invalidate` (callers do that on NOT_LEADER / UNKNOWN_TOPIC errors);
coordinators are looked up with FindCoordinator and forgotten by :meth:`forget_coordinator`.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup
from oncelog.client.connection import BrokerConnection
from oncelog.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from oncelog.client.security import PLAINTEXT, ConnectionSecurity
from oncelog.client.types import TopicPartition
from oncelog.protocol import ApiKey, ErrorCode

RECONNECT_BACKOFF_MS = 50  # reconnect.backoff.ms, Kafka default 50
RECONNECT_BACKOFF_MAX_MS = 1000  # reconnect.backoff.max.ms, Kafka default 1000
METADATA_MAX_AGE_MS = 300000  # metadata.max.age.ms, Kafka default 300000
RETRY_BACKOFF_MS = 100  # retry.backoff.ms, Kafka default 100
COORDINATOR_GROUP = 0  # FindCoordinator key_type for a consumer group
COORDINATOR_TRANSACTION = 1  # FindCoordinator key_type for a transactional id
_COORDINATOR_RETRY = frozenset(
    {
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


def parse_bootstrap(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """``"h1:9092,h2:9093"`` or a list of ``host:port`` -> [(host, port)]; the port defaults to 9092."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep:
            host, port = item, "9092"
        out.append((host.strip("[]"), int(port)))
    if not out:
        raise ValueError("bootstrap_servers is empty")
    return out


@dataclass
class TopicInfo:
    error_code: int
    leaders: dict[int, int] = field(default_factory=dict)  # partition -> leader node id (-1 unknown)
    is_internal: bool = False


@dataclass
class _NodeState:
    failures: int = 0
    next_attempt: float = 0.0


class Cluster:
    """Connections and metadata shared by one producer, consumer or admin client. An async context manager."""

    def __init__(
        self,
        bootstrap_servers: str | Iterable[str],
        *,
        client_id: str = "oncelog",
        request_timeout_ms: int = 30000,
        max_in_flight: int = 5,
        reconnect_backoff_ms: int = RECONNECT_BACKOFF_MS,
        reconnect_backoff_max_ms: int = RECONNECT_BACKOFF_MAX_MS,
        metadata_max_age_ms: int = METADATA_MAX_AGE_MS,
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
        security: ConnectionSecurity = PLAINTEXT,
    ) -> None:
        """``security``: TLS and SASL of every broker connection (``client.security.connection_security``)."""
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.security = security
        self.client_id = client_id
        self.request_timeout_ms = request_timeout_ms
        self.max_in_flight = max_in_flight
        self.reconnect_backoff_ms = reconnect_backoff_ms
        self.reconnect_backoff_max_ms = reconnect_backoff_max_ms
        self.metadata_max_age_ms = metadata_max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.brokers: dict[int, tuple[str, int]] = {}
        self.racks: dict[int, str | None] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self._metadata_at = 0.0
        self._stale = True
        self._conns: dict[Any, BrokerConnection] = {}
        self._node_state: dict[Any, _NodeState] = {}
        self._connect_locks: dict[Any, anyio.Lock] = {}
        self._metadata_lock: anyio.Lock | None = None
        self._coordinators: dict[tuple[int, str], int] = {}
        self._tg: TaskGroup | None = None
        self._tg_cm: Any = None

    # --- lifecycle ----------------------------------------------------------------------------------------

    async def __aenter__(self) -> Cluster:
        self._tg_cm = anyio.create_task_group()
        self._tg = await self._tg_cm.__aenter__()
        self._metadata_lock = anyio.Lock()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        await self.close()
        assert self._tg_cm is not None
        return await self._tg_cm.__aexit__(*exc)

    @property
    def task_group(self) -> TaskGroup:
        if self._tg is None:
            raise RuntimeError("the client is not started (use it as an async context manager)")
        return self._tg

    async def close(self) -> None:
        """Close every connection and cancel background tasks."""
        conns, self._conns = list(self._conns.values()), {}
        with anyio.CancelScope(shield=True):
            for conn in conns:
                await conn.aclose()
        if self._tg is not None:
            self._tg.cancel_scope.cancel()

    # --- connections --------------------------------------------------------------------------------------

    async def connection(self, node_id: int) -> BrokerConnection:
        """An open connection to broker ``node_id`` (known from metadata)."""
        if node_id not in self.brokers:
            await self.refresh_metadata()
            if node_id not in self.brokers:
                raise KafkaConnectionError(f"unknown broker {node_id}")
        host, port = self.brokers[node_id]
        return await self._connect(node_id, host, port)

    async def _connect(self, key: Any, host: str, port: int) -> BrokerConnection:
        conn = self._conns.get(key)
        if conn is not None and conn.connected and (conn.host, conn.port) == (host, port):
            return conn
        lock = self._connect_locks.setdefault(key, anyio.Lock())
        async with lock:
            conn = self._conns.get(key)
            if conn is not None and conn.connected and (conn.host, conn.port) == (host, port):
                return conn
            state = self._node_state.setdefault(key, _NodeState())
            delay = state.next_attempt - time.monotonic()
            if delay > 0:
                await anyio.sleep(delay)
            conn = BrokerConnection(
                host,
                port,
                node_id=key if isinstance(key, int) else -1,
                client_id=self.client_id,
                max_in_flight=self.max_in_flight,
                request_timeout_ms=self.request_timeout_ms,
                ssl_context=self.security.ssl_context,
                sasl=self.security.sasl,
            )
            try:
                await conn.open(self.task_group)
            except KafkaConnectionError:
                state.failures += 1
                backoff = min(self.reconnect_backoff_ms * 2 ** (state.failures - 1), self.reconnect_backoff_max_ms)
                state.next_attempt = time.monotonic() + backoff / 1000 * random.uniform(0.8, 1.2)
                raise
            state.failures = 0
            self._conns[key] = conn
            return conn

    async def any_connection(self) -> BrokerConnection:
        """A connection to any known broker, else to a bootstrap server (each tried in turn)."""
        for conn in self._conns.values():
            if conn.connected:
                return conn
        last: KafkaError | None = None
        candidates = [(n, h, p) for n, (h, p) in self.brokers.items()]
        candidates += [(("bootstrap", h, p), h, p) for h, p in self.bootstrap]
        for key, host, port in candidates:
            try:
                return await self._connect(key, host, port)
            except KafkaConnectionError as exc:
                last = exc
        raise last or KafkaConnectionError("no broker reachable")

    async def request(self, node_id: int | None, key: ApiKey, body: Mapping[str, Any], **kw: Any) -> Any:
        """Send ``body`` to ``node_id`` (any broker when None) and return the decoded response."""
        conn = await (self.any_connection() if node_id is None else self.connection(node_id))
        return await conn.request(key, body, **kw)

    async def versions(self, node_id: int | None = None) -> dict[ApiKey, int]:
        """Negotiated versions with ``node_id`` (any broker when None)."""
        conn = await (self.any_connection() if node_id is None else self.connection(node_id))
        return conn.versions

    # --- metadata -----------------------------------------------------------------------------------------

    def invalidate(self) -> None:
        """Mark the metadata stale: the next lookup refreshes it."""
        self._stale = True

    def metadata_fresh(self) -> bool:
        age_ms = (time.monotonic() - self._metadata_at) * 1000
        return not self._stale and age_ms < self.metadata_max_age_ms

    async def refresh_metadata(self, topics: Iterable[str] | None = None, *, allow_auto_create: bool = True) -> Any:
        """Fetch metadata for ``topics`` (all topics when None), merge it into the cache, return the response."""
        assert self._metadata_lock is not None
        wanted = None if topics is None else sorted(set(topics))
        async with self._metadata_lock:
            deadline = time.monotonic() + self.request_timeout_ms / 1000
            while True:
                try:
                    conn = await self.any_connection()
                    body = {
                        "topics": None if wanted is None else [{"name": t} for t in wanted],
                        "allow_auto_topic_creation": allow_auto_create,
                    }
                    resp = await conn.request(ApiKey.METADATA, body)
                    break
                except KafkaConnectionError:
                    if time.monotonic() > deadline:
                        raise
                    await anyio.sleep(self.retry_backoff_ms / 1000)
            self.brokers = {b.node_id: (b.host, b.port) for b in resp.brokers}
            self.racks = {b.node_id: b.rack for b in resp.brokers}
            self.cluster_id = resp.cluster_id
            self.controller_id = resp.controller_id
            if wanted is None:
                self.topics = {}
            for t in resp.topics:
                self.topics[t.name] = TopicInfo(
                    t.error_code, {p.partition_index: p.leader_id for p in t.partitions}, t.is_internal
                )
            self._metadata_at = time.monotonic()
            self._stale = False
            return resp

    async def topic(self, name: str, *, wait_s: float | None = None) -> TopicInfo:
        """Metadata of ``name``; retries while the topic is unknown or leaderless, up to ``wait_s``."""
        deadline = time.monotonic() + (wait_s if wait_s is not None else self.request_timeout_ms / 1000)
        while True:
            info = self.topics.get(name)
            if info is None or not self.metadata_fresh() or info.error_code:
                await self.refresh_metadata([name])
                info = self.topics.get(name)
            if (
                info is not None
                and info.error_code == 0
                and info.leaders
                and all(leader >= 0 for leader in info.leaders.values())
            ):
                return info
            if info is not None and info.error_code and not ErrorCode(info.error_code).retriable:
                raise error_for(info.error_code, f"topic {name}")
            if time.monotonic() > deadline:
                code = info.error_code if info is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
                raise KafkaTimeoutError(f"no metadata for topic {name}: {ErrorCode(code or 5).name}")
            self.invalidate()
            await anyio.sleep(self.retry_backoff_ms / 1000)

    async def partitions_for(self, name: str) -> int:
        return len((await self.topic(name)).leaders)

    async def leader_for(self, tp: TopicPartition) -> int:
        """The leader's node id of ``tp`` (refreshing metadata when needed)."""
        info = await self.topic(tp.topic)
        leader = info.leaders.get(tp.partition)
        if leader is None:
            raise error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"{tp.topic}-{tp.partition}")
        return leader

    # --- coordinators -------------------------------------------------------------------------------------

    def forget_coordinator(self, key_type: int, key: str) -> None:
        self._coordinators.pop((key_type, key), None)

    async def coordinator(self, key_type: int, key: str, *, wait_s: float | None = None) -> int:
        """Node id of the coordinator of ``key`` (FindCoordinator), retrying while it is unavailable."""
        cached = self._coordinators.get((key_type, key))
        if cached is not None:
            return cached
        deadline = time.monotonic() + (wait_s if wait_s is not None else self.request_timeout_ms / 1000)
        while True:
            conn = await self.any_connection()
            version = conn.versions.get(ApiKey.FIND_COORDINATOR, -1)
            if version >= 4:
                resp = await conn.request(ApiKey.FIND_COORDINATOR, {"key_type": key_type, "coordinator_keys": [key]})
                entry = resp.coordinators[0]
                code, node, host, port = entry.error_code, entry.node_id, entry.host, entry.port
            else:
                resp = await conn.request(ApiKey.FIND_COORDINATOR, {"key": key, "key_type": key_type})
                code, node, host, port = resp.error_code, resp.node_id, resp.host, resp.port
            if code == 0:
                self.brokers.setdefault(node, (host, port))
                self._coordinators[(key_type, key)] = node
                return node
            if code not in _COORDINATOR_RETRY or time.monotonic() > deadline:
                raise error_for(code, f"FindCoordinator {key!r}")
            await anyio.sleep(self.retry_backoff_ms / 1000)
