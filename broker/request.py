"""What a handler receives and may return."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from oncelog.broker.request_budget import ResponseHold
from oncelog.protocol import RequestHeader


@dataclass(frozen=True)
class Request:
    """One decoded request and where it came from."""

    header: RequestHeader
    body: Any
    client_host: str
    #: The name of the listener the request arrived on (None: the broker's first listener).
    listener: str | None = None
    #: For a handler that waits long (a parked Fetch): run it beside the wait and it closes the connection, which
    #: cancels the handler, once the client has gone; it never returns otherwise. None: nothing to watch.
    watch_disconnect: Callable[[], Awaitable[None]] | None = None
    #: For a handler whose response may be large (Fetch): its share of the broker's budget of response bytes not
    #: yet sent, released by the connection once the response is sent. None: no budget.
    response_hold: ResponseHold | None = None

    @property
    def version(self) -> int:
        return self.header.api_version


@dataclass(frozen=True)
class Deferred:
    """A response that completes later (e.g. after an fsync) while the connection goes on reading requests.

    Responses are still written in request order: the connection's writer awaits each one in turn.
    """

    complete: Callable[[], Awaitable[dict]]
    #: True once ``complete`` would return without waiting: the writer then sends it with the answers before it.
    ready: Callable[[], bool]


class MalformedRequest(Exception):
    """Raised by a handler for a request Kafka refuses while parsing it (its request class's constructor throws, e.g.
    an ACL filter holding an UNKNOWN code): the connection is closed without an answer, as Kafka's SocketServer
    closes it."""


#: A handler answers with a response body, a Deferred one, or None for no response at all (Produce acks=0).
Response = dict | Deferred | None


class Handler(Protocol):
    async def __call__(self, broker: Any, request: Request) -> Response: ...
