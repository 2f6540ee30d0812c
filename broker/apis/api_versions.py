"""ApiVersions (18): the API key ranges this broker implements."""

from __future__ import annotations

from oncelog.broker.request import Request
from oncelog.protocol import SUPPORTED_VERSIONS, ErrorCode


def supported_api_keys() -> list[dict]:
    return [
        {"api_key": int(key), "min_version": low, "max_version": high}
        for key, (low, high) in sorted(SUPPORTED_VERSIONS.items())
    ]


async def handle(broker: object, request: Request) -> dict:
    return {"error_code": ErrorCode.NONE, "api_keys": supported_api_keys(), "throttle_time_ms": 0}
