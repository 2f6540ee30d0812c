"""A one-shot result that async code awaits (``await fut``) and callbacks observe; created inside the event loop."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any, Generic, TypeVar

import anyio

T = TypeVar("T")


class Future(Generic[T]):
    """Set exactly once with :meth:`set_result` or :meth:`set_exception`; later sets are ignored."""

    __slots__ = ("_callbacks", "_done", "_error", "_event", "_result")

    def __init__(self) -> None:
        self._done = False
        self._event: anyio.Event | None = None  # created only when someone waits (most futures never are)
        self._result: T | None = None
        self._error: BaseException | None = None
        self._callbacks: list[Callable[[Future[T]], Any]] | None = None  # made by the first add_done_callback

    def done(self) -> bool:
        return self._done

    def set_result(self, value: T) -> None:
        if not self._done:
            self._result = value
            self._finish()

    def set_exception(self, error: BaseException) -> None:
        if not self._done:
            self._error = error
            self._finish()

    def _finish(self) -> None:
        self._done = True
        if self._event is not None:
            self._event.set()
        callbacks = self._callbacks
        if callbacks:
            self._callbacks = None
            for callback in callbacks:
                callback(self)

    def add_done_callback(self, callback: Callable[[Future[T]], Any]) -> None:
        """Call ``callback(self)`` once done (immediately if already done)."""
        if self._done:
            callback(self)
        elif self._callbacks is None:
            self._callbacks = [callback]
        else:
            self._callbacks.append(callback)

    def result(self) -> T:
        """The result (or raise the error); RuntimeError when not done yet."""
        if not self.done():
            raise RuntimeError("result is not ready")
        if self._error is not None:
            raise self._error
        return self._result  # type: ignore[return-value]

    def exception(self) -> BaseException | None:
        if not self.done():
            raise RuntimeError("result is not ready")
        return self._error

    async def wait(self) -> T:
        if not self._done:
            if self._event is None:
                self._event = anyio.Event()
            await self._event.wait()
        return self.result()

    def __await__(self) -> Generator[Any, None, T]:
        return self.wait().__await__()


class Signal:
    """Wake every current waiter; waiters that come later wait for the next :meth:`notify`."""

    def __init__(self) -> None:
        self._event = anyio.Event()

    def notify(self) -> None:
        self._event.set()
        self._event = anyio.Event()

    async def wait(self) -> None:
        await self._event.wait()
