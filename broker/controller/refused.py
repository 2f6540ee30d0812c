"""The one exception of the controller's decisions: what was asked cannot be done, with Kafka's error code."""

from __future__ import annotations

from oncelog.protocol.errors import ErrorCode


class Refused(Exception):
    """Refused with Kafka's ``error`` code (the one the request's answer carries); nothing was changed."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
