"""An etcd v3 client over etcd's JSON gateway (``/v3/...``, etcd >= 3.4), on httpx, for trio and asyncio.

Why this shape: no etcd client for Python is trio-native. The gRPC ones (``aetcd``, ``etcd3aio``) are asyncio-only,
and ``etcd3gw`` is blocking (requests), so it would need a worker thread per call and one parked per watch. etcd
serves the same v3 API as JSON over HTTP; httpx (well kept, anyio underneath) speaks it from either event loop, streams
watch responses line by line, and keeps connections alive. The whole API the cluster needs is small: range, put,
delete, compare-and-swap transactions, leases and watches. Measured beside etcd3gw in ``bench/etcd_client_bench.py``.

Keys are ``str`` (UTF-8), values ``bytes``; the gateway wants both base64-encoded. Proto3's JSON mapping leaves out
fields that hold their default (``succeeded: false``, ``TTL: 0``, a ``PUT`` event's type, revision 0), so every read
here supplies the default. Endpoints are tried in order; a transport failure moves to the next one, and
``EtcdUnavailable`` is raised once every endpoint failed for one call.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import httpx

#: How long one unary call may take before the next endpoint is tried (etcd's own request timeout is 5 s as well).
DEFAULT_REQUEST_TIMEOUT_S = 5.0


class EtcdError(Exception):
    """etcd refused a request; ``code`` is the gRPC status code (5 NOT_FOUND: e.g. an expired lease)."""

    def __init__(self, message: str, code: int = 0) -> None:
        super().__init__(message)
        self.code = code


class EtcdUnavailable(EtcdError):
    """No endpoint answered."""


class GuardFailed(EtcdError):
    """A transaction's extra guard did not hold (e.g. the controller epoch moved on): the writer has been fenced."""


class WatchCompacted(EtcdError):
    """A watch asked for revisions etcd has compacted away; re-read the keys from ``compact_revision``."""

    def __init__(self, compact_revision: int) -> None:
        super().__init__(f"watch start revision is compacted; oldest kept is {compact_revision}")
        self.compact_revision = compact_revision


#: gRPC status code etcd answers with for a lease that does not exist (any more).
GRPC_NOT_FOUND = 5


def _b64(data: str | bytes) -> str:
    return base64.b64encode(data.encode() if isinstance(data, str) else data).decode("ascii")


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def prefix_end(prefix: str) -> bytes:
    """The ``range_end`` that makes a range cover every key starting with ``prefix`` (etcd's prefix rule)."""
    raw = bytearray(prefix.encode())
    while raw:
        if raw[-1] < 0xFF:
            raw[-1] += 1
            return bytes(raw)
        raw.pop()
    return b"\0"  # every key


def key_range(key: str, *, prefix: bool) -> dict[str, Any]:
    """The gateway's ``key`` / ``range_end`` fields for ``key`` alone or for every key under it."""
    body: dict[str, Any] = {"key": _b64(key)}
    if prefix:
        body["range_end"] = _b64(prefix_end(key))
    return body


@dataclass(frozen=True)
class KeyValue:
    """One key as etcd stores it: its value and the revisions that compare-and-swap guards use."""

    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    version: int
    lease: int = 0

    @classmethod
    def from_json(cls, item: dict[str, Any]) -> KeyValue:
        return cls(
            key=_unb64(item.get("key")).decode(),
            value=_unb64(item.get("value")),
            create_revision=int(item.get("create_revision", 0)),
            mod_revision=int(item.get("mod_revision", 0)),
            version=int(item.get("version", 0)),
            lease=int(item.get("lease", 0)),
        )


class CompareTarget(Enum):
    """What a transaction's guard compares (etcd's ``Compare.target``), with its field name in JSON."""

    VERSION = "version"
    CREATE = "create_revision"
    MOD = "mod_revision"
    VALUE = "value"
    LEASE = "lease"


_RESULTS = {"==": "EQUAL", "!=": "NOT_EQUAL", ">": "GREATER", "<": "LESS"}


@dataclass(frozen=True)
class Compare:
    """One guard of a transaction: ``target`` of ``key`` compared with ``value`` by ``op`` (``== != > <``)."""

    key: str
    target: CompareTarget
    op: str
    value: int | bytes

    def to_json(self) -> dict[str, Any]:
        value = _b64(self.value) if self.target is CompareTarget.VALUE else str(self.value)
        return {
            "key": _b64(self.key),
            "target": self.target.name,
            "result": _RESULTS[self.op],
            self.target.value: value,
        }

    @classmethod
    def absent(cls, key: str) -> Compare:
        """The key does not exist (its create revision is 0)."""
        return cls(key, CompareTarget.CREATE, "==", 0)

    @classmethod
    def unchanged(cls, kv: KeyValue) -> Compare:
        """The key is still at the revision ``kv`` was read at (the AlterPartition-style guard)."""
        return cls(kv.key, CompareTarget.MOD, "==", kv.mod_revision)


@dataclass(frozen=True)
class Put:
    key: str
    value: bytes
    lease: int = 0

    def to_json(self) -> dict[str, Any]:
        body: dict[str, Any] = {"key": _b64(self.key), "value": _b64(self.value)}
        if self.lease:
            body["lease"] = str(self.lease)
        return {"request_put": body}


@dataclass(frozen=True)
class Delete:
    key: str
    prefix: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"request_delete_range": key_range(self.key, prefix=self.prefix)}


@dataclass(frozen=True)
class Get:
    key: str
    prefix: bool = False

    def to_json(self) -> dict[str, Any]:
        return {"request_range": key_range(self.key, prefix=self.prefix)}


Operation = Put | Delete | Get


@dataclass(frozen=True)
class TxnResult:
    """Whether the guards held, the store's revision after the transaction, and the ranges its ``Get``s read."""

    succeeded: bool
    revision: int
    ranges: list[list[KeyValue]] = field(default_factory=list)


@dataclass(frozen=True)
class Lease:
    id: int
    ttl_s: int


@dataclass(frozen=True)
class WatchEvent:
    """A key was put (``deleted`` false, ``kv`` its new state) or deleted (``kv.value`` empty)."""

    deleted: bool
    kv: KeyValue


@dataclass(frozen=True)
class WatchBatch:
    """The events of one revision (or a progress notice, with no events), in revision order."""

    revision: int
    events: list[WatchEvent]


class EtcdClient:
    """Calls to one etcd cluster. Use as ``async with EtcdClient(endpoints) as etcd:``; safe to share between tasks."""

    def __init__(self, endpoints: Sequence[str], *, request_timeout_s: float = DEFAULT_REQUEST_TIMEOUT_S) -> None:
        if not endpoints:
            raise ValueError("at least one etcd endpoint is needed")
        self._endpoints = list(endpoints)
        self._timeout = httpx.Timeout(request_timeout_s)
        #: A watch waits for events as long as it takes; only connecting and writing are bounded.
        self._watch_timeout = httpx.Timeout(request_timeout_s, read=None)
        self._http = httpx.AsyncClient(timeout=self._timeout)

    async def __aenter__(self) -> EtcdClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # -- key-value -------------------------------------------------------------------------------------------------

    async def get(self, key: str) -> KeyValue | None:
        answer = await self._call("/v3/kv/range", {"key": _b64(key)})
        kvs = answer.get("kvs", [])
        return KeyValue.from_json(kvs[0]) if kvs else None

    async def get_prefix(self, prefix: str) -> tuple[list[KeyValue], int]:
        """Every key under ``prefix`` in key order, and the revision they were read at (to start a watch after)."""
        answer = await self._call("/v3/kv/range", key_range(prefix, prefix=True))
        return [KeyValue.from_json(kv) for kv in answer.get("kvs", [])], _revision(answer)

    async def put(self, key: str, value: bytes, *, lease: int = 0) -> int:
        """Store ``value`` at ``key`` (attached to ``lease`` when given); the store's new revision."""
        return _revision(await self._call("/v3/kv/put", Put(key, value, lease).to_json()["request_put"]))

    async def delete(self, key: str, *, prefix: bool = False) -> int:
        """Delete ``key`` (or every key under it); how many keys went."""
        answer = await self._call("/v3/kv/deleterange", Delete(key, prefix).to_json()["request_delete_range"])
        return int(answer.get("deleted", 0))

    async def txn(
        self, compare: Sequence[Compare], success: Sequence[Operation], failure: Sequence[Operation] = ()
    ) -> TxnResult:
        """Run ``success`` if every guard in ``compare`` holds, else ``failure``, atomically."""
        answer = await self._call(
            "/v3/kv/txn",
            {
                "compare": [c.to_json() for c in compare],
                "success": [op.to_json() for op in success],
                "failure": [op.to_json() for op in failure],
            },
        )
        ranges = [
            [KeyValue.from_json(kv) for kv in response["response_range"].get("kvs", [])]
            for response in answer.get("responses", [])
            if "response_range" in response
        ]
        return TxnResult(succeeded=bool(answer.get("succeeded", False)), revision=_revision(answer), ranges=ranges)

    async def update(
        self, key: str, change: Callable[[KeyValue | None], bytes], *, guards: Sequence[Compare] = ()
    ) -> tuple[bytes, int]:
        """Read-modify-write of one key, guarded by its revision: ``change`` gets the key as read (None when absent)
        and returns the new value, which is stored only if nobody changed the key since; on a conflict the key is
        read again and ``change`` asked again. Returns the value stored and the revision it was stored at.
        ``change`` may raise to give up (nothing is written). ``guards`` must hold too (a controller's epoch, say);
        when one fails, ``GuardFailed`` is raised instead of trying again."""
        while True:
            current = await self.get(key)
            value = change(current)
            guard = Compare.unchanged(current) if current else Compare.absent(key)
            result = await self.txn([guard, *guards], [Put(key, value)], [Get(key)])
            if result.succeeded:
                return value, result.revision
            now = result.ranges[0][0] if result.ranges and result.ranges[0] else None
            if guards and (now.mod_revision if now else 0) == (current.mod_revision if current else 0):
                raise GuardFailed(f"a guard of the update of {key} no longer holds")

    # -- leases ----------------------------------------------------------------------------------------------------

    async def grant_lease(self, ttl_s: int) -> Lease:
        answer = await self._call("/v3/lease/grant", {"TTL": str(ttl_s)})
        return Lease(id=int(answer["ID"]), ttl_s=int(answer.get("TTL", 0)))

    async def keep_alive(self, lease_id: int) -> int:
        """Renew the lease; its remaining TTL in seconds, 0 when it has already expired (its keys are gone)."""
        answer = await self._call("/v3/lease/keepalive", {"ID": str(lease_id)})
        return int(answer.get("result", answer).get("TTL", 0))

    async def revoke_lease(self, lease_id: int) -> None:
        """End the lease now, deleting its keys; an already-expired lease is not an error."""
        try:
            await self._call("/v3/lease/revoke", {"ID": str(lease_id)})
        except EtcdError as exc:
            if exc.code != GRPC_NOT_FOUND:
                raise

    # -- watches ---------------------------------------------------------------------------------------------------

    async def watch(self, key: str, *, start_revision: int, prefix: bool = True) -> AsyncIterator[WatchBatch]:
        """Changes of every key under ``key`` (or of ``key`` alone, ``prefix=False``) from ``start_revision`` on,
        one batch per revision, until the caller stops.

        Raises ``WatchCompacted`` when that revision is gone, ``EtcdUnavailable`` when the stream breaks (the caller
        re-reads and watches again from the revision after the last batch it saw).
        """
        request = {"create_request": {**key_range(key, prefix=prefix), "start_revision": str(start_revision)}}
        for base in list(self._endpoints):
            try:
                async with self._http.stream(
                    "POST", base + "/v3/watch", json=request, timeout=self._watch_timeout
                ) as response:
                    _raise_for_status(response.status_code, await _peek_error(response))
                    async for line in response.aiter_lines():
                        batch = _watch_batch(json.loads(line)) if line.strip() else None
                        if batch is not None:
                            # Another endpoint resumes after the last revision delivered, never repeating one.
                            request["create_request"]["start_revision"] = str(batch.revision + 1)
                            yield batch
            except httpx.TransportError:
                continue
        raise EtcdUnavailable(f"no etcd endpoint kept a watch open: {', '.join(self._endpoints)}")

    # -- plumbing --------------------------------------------------------------------------------------------------

    async def _call(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        failures: list[str] = []
        for _ in range(len(self._endpoints)):
            base = self._endpoints[0]
            try:
                response = await self._http.post(base + path, json=body)
            except httpx.TransportError as exc:
                failures.append(f"{base}: {type(exc).__name__}")
                self._endpoints.append(self._endpoints.pop(0))  # the next call starts with one that answered
                continue
            answer = response.json() if response.content else {}
            _raise_for_status(response.status_code, answer)
            return answer
        raise EtcdUnavailable(f"no etcd endpoint answered {path}: {'; '.join(failures)}")


def _revision(answer: dict[str, Any]) -> int:
    return int(answer.get("header", {}).get("revision", 0))


def _raise_for_status(status: int, answer: dict[str, Any]) -> None:
    if status == 200 and "error" not in answer:
        return
    # Unary calls answer {"error": "...", "code": N, "message": "..."}; a stream wraps that object in "error".
    error = answer["error"] if isinstance(answer.get("error"), dict) else answer
    message = error.get("message") or error.get("error") or f"HTTP {status}"
    raise EtcdError(f"etcd: {message}", int(error.get("code", 0)))


async def _peek_error(response: httpx.Response) -> dict[str, Any]:
    if response.status_code == 200:
        return {}
    await response.aread()
    return response.json() if response.content else {}


def _watch_batch(message: dict[str, Any]) -> WatchBatch | None:
    if "error" in message:
        _raise_for_status(500, message)
    result = message.get("result", {})
    compact = int(result.get("compact_revision", 0))
    if compact:
        raise WatchCompacted(compact)
    if result.get("canceled"):
        raise EtcdError(f"etcd cancelled the watch: {result.get('cancel_reason', '')}")
    if result.get("created"):
        return None
    events = [
        WatchEvent(deleted=event.get("type") == "DELETE", kv=KeyValue.from_json(event["kv"]))
        for event in result.get("events", [])
    ]
    return WatchBatch(revision=_revision(result), events=events)
