"""The broker's handler table covers exactly the APIs protocol.api.APIS registers."""

from __future__ import annotations

from oncelog.broker.apis import HANDLERS, unhandled
from oncelog.protocol import APIS, SUPPORTED_VERSIONS, ApiKey


def test_every_advertised_api_has_a_handler() -> None:
    assert unhandled() == []
    assert set(HANDLERS) == set(APIS) == set(SUPPORTED_VERSIONS)


def test_a_missing_handler_is_reported() -> None:
    partial = {k: h for k, h in HANDLERS.items() if k is not ApiKey.END_TXN}
    assert unhandled(partial) == [ApiKey.END_TXN]
