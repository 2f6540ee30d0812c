"""Blocking Producer, Consumer and Admin for scripts and Spark tasks.

Each object runs its async counterpart on an event loop in a background thread (anyio's blocking portal) and
blocks the calling thread for every call. Guarantees: the same semantics and errors as the async clients; every
method not defined here is forwarded to the async client and waited for. Use as context managers or call close().
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from oncelog.client.admin import Admin as AsyncAdmin
from oncelog.client.consumer import Consumer as AsyncConsumer
from oncelog.client.future import Future
from oncelog.client.producer import Producer as AsyncProducer
from oncelog.client.types import ConsumerRecord, RecordMetadata, TopicPartition


class _Blocking:
    def __init__(self, factory: Callable[[], Any], backend: str) -> None:
        self._portal_cm = start_blocking_portal(backend)
        self._portal: BlockingPortal = self._portal_cm.__enter__()
        self._cm: Any = None
        try:
            self._async = self._portal.call(factory)
            self._cm = self._portal.wrap_async_context_manager(self._async)
            self._cm.__enter__()
        except BaseException:
            self._portal_cm.__exit__(None, None, None)
            raise

    def _call(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        return self._portal.call(functools.partial(fn, *args, **kw))

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._async, name)
        if callable(attr):
            return functools.partial(self._call, attr)
        return attr

    def close(self) -> None:
        """Close the async client and stop the event loop thread (idempotent)."""
        cm, self._cm = self._cm, None
        if cm is not None:
            try:
                cm.__exit__(None, None, None)
            finally:
                self._portal_cm.__exit__(None, None, None)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class DeliveryHandle:
    """A blocking view of a delivery future."""

    def __init__(self, portal: BlockingPortal, fut: Future[RecordMetadata]) -> None:
        self._portal = portal
        self._fut = fut

    def done(self) -> bool:
        return self._fut.done()

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Wait for delivery; raises the delivery error, or TimeoutError after ``timeout`` seconds."""

        async def wait() -> RecordMetadata:
            with anyio.fail_after(timeout):
                return await self._fut

        return self._portal.call(wait)


class Producer(_Blocking):
    """Blocking producer; takes the same arguments as :class:`oncelog.client.Producer` plus ``backend``."""

    def __init__(self, bootstrap_servers: Any, *, backend: str = "asyncio", **config: Any) -> None:
        super().__init__(lambda: AsyncProducer(bootstrap_servers, **config), backend)

    def send(self, topic: str, value: Any, key: Any = None, **kw: Any) -> DeliveryHandle:
        fut = self._call(self._async.send, topic, value, key, **kw)
        return DeliveryHandle(self._portal, fut)

    def send_and_wait(self, topic: str, value: Any, key: Any = None, **kw: Any) -> RecordMetadata:
        return self._call(self._async.send_and_wait, topic, value, key, **kw)

    def flush(self) -> None:
        self._call(self._async.flush)

    def init_transactions(self) -> None:
        self._call(self._async.init_transactions)

    def begin_transaction(self) -> None:
        self._call(self._async.begin_transaction)

    def send_offsets_to_transaction(self, offsets: Any, group_metadata: Any) -> None:
        self._call(self._async.send_offsets_to_transaction, offsets, group_metadata)

    def commit_transaction(self) -> None:
        self._call(self._async.commit_transaction)

    def abort_transaction(self) -> None:
        self._call(self._async.abort_transaction)


class Consumer(_Blocking):
    """Blocking consumer; iterate it for records one by one, or call :meth:`getmany`."""

    def __init__(self, bootstrap_servers: Any, *, backend: str = "asyncio", **config: Any) -> None:
        super().__init__(lambda: AsyncConsumer(bootstrap_servers, **config), backend)

    def assign(self, partitions: Any) -> None:
        self._call(self._async.assign, list(partitions))

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._call(self._async.seek, tp, offset)

    def position(self, tp: TopicPartition) -> int:
        return self._call(self._async.position, tp)

    def getmany(
        self, *partitions: TopicPartition, timeout_ms: int = 0, max_records: int | None = None
    ) -> dict[TopicPartition, list[ConsumerRecord]]:
        return self._call(self._async.getmany, *partitions, timeout_ms=timeout_ms, max_records=max_records)

    def __iter__(self) -> Iterator[ConsumerRecord]:
        while True:
            yield self._call(self._async.getone)


class Admin(_Blocking):
    """Blocking admin client; every method of :class:`oncelog.client.Admin`, blocking."""

    def __init__(self, bootstrap_servers: Any, *, backend: str = "asyncio", **config: Any) -> None:
        super().__init__(lambda: AsyncAdmin(bootstrap_servers, **config), backend)
