"""BrokerConnection against a scripted TCP server: ApiVersions fallback, negotiation, pipelining, failures."""

from __future__ import annotations

import contextlib
import struct

import anyio
import pytest
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from oncelog.client.connection import BrokerConnection
from oncelog.client.errors import KafkaConnectionError, UnsupportedVersionError
from oncelog.protocol import ApiKey, ErrorCode, decode_request_header, encode_response
from oncelog.protocol.headers import RequestHeader

pytestmark = pytest.mark.anyio
SIZE = struct.Struct(">i")
# What the scripted broker advertises: ApiVersions only up to 2, Metadata 0-5, Produce 3-7.
BROKER_RANGES = {ApiKey.API_VERSIONS: (0, 2), ApiKey.METADATA: (0, 5), ApiKey.PRODUCE: (3, 7)}


def api_versions_body(error: int = 0) -> dict:
    return {
        "error_code": error,
        "api_keys": [
            {"api_key": int(k), "min_version": lo, "max_version": hi} for k, (lo, hi) in BROKER_RANGES.items()
        ],
    }


async def read_frame(rx: BufferedByteReceiveStream) -> tuple[RequestHeader, bytes]:
    (size,) = SIZE.unpack(await rx.receive_exactly(4))
    frame = await rx.receive_exactly(size)
    return decode_request_header(frame), frame


async def send(stream: SocketStream, data: bytes) -> None:
    await stream.send(SIZE.pack(len(data)) + data)


class Script:
    def __init__(self, *, pipeline: int = 3, corrupt_id: bool = False) -> None:
        self.pipeline = pipeline
        self.corrupt_id = corrupt_id
        self.seen_versions: list[tuple[int, int]] = []
        self.max_outstanding = 0

    async def serve(self, stream: SocketStream) -> None:
        with contextlib.suppress(anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError):
            await self._serve(stream)  # until the client hangs up

    async def _serve(self, stream: SocketStream) -> None:
        rx = BufferedByteReceiveStream(stream)
        async with stream:
            header, _ = await read_frame(rx)
            self.seen_versions.append((header.api_key, header.api_version))
            assert header.api_version == 3
            # KIP-511: an unsupported ApiVersions version is answered as v0 with UNSUPPORTED_VERSION.
            await send(
                stream,
                encode_response(
                    RequestHeader(18, 0, header.correlation_id, None, 0),
                    api_versions_body(ErrorCode.UNSUPPORTED_VERSION),
                ),
            )
            header, _ = await read_frame(rx)
            self.seen_versions.append((header.api_key, header.api_version))
            await send(stream, encode_response(header, api_versions_body()))
            while True:
                batch = []
                for _ in range(self.pipeline):
                    header, _ = await read_frame(rx)
                    self.seen_versions.append((header.api_key, header.api_version))
                    batch.append(header)
                self.max_outstanding = max(self.max_outstanding, len(batch))
                for h in batch:
                    if self.corrupt_id:
                        h = RequestHeader(h.api_key, h.api_version, h.correlation_id + 1000, None, 0)
                    await send(stream, encode_response(h, {"brokers": [], "topics": [], "controller_id": 1}))


async def test_negotiation_fallback_and_pipelining() -> None:
    script = Script(pipeline=3)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, script.serve)
        conn = BrokerConnection("127.0.0.1", port, max_in_flight=3)
        await conn.open(tg)
        assert script.seen_versions == [(18, 3), (18, 2)]
        assert conn.versions[ApiKey.METADATA] == 5  # min(our 9, broker 5)
        assert conn.versions[ApiKey.PRODUCE] == 7
        assert ApiKey.FETCH not in conn.versions
        with pytest.raises(UnsupportedVersionError):
            await conn.request(ApiKey.FETCH, {})
        results = []

        async def ask() -> None:
            results.append(await conn.request(ApiKey.METADATA, {"topics": None}))

        async with anyio.create_task_group() as inner:
            for _ in range(6):
                inner.start_soon(ask)
        # The server answers only after holding 3 requests at once: the connection pipelines them.
        assert len(results) == 6 and script.max_outstanding == 3
        assert all(r.controller_id == 1 for r in results)
        await conn.aclose()
        with pytest.raises(KafkaConnectionError):
            await conn.request(ApiKey.METADATA, {"topics": None})
        tg.cancel_scope.cancel()


async def test_mismatched_correlation_id_fails_outstanding_requests() -> None:
    script = Script(pipeline=1, corrupt_id=True)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, script.serve)
        conn = BrokerConnection("127.0.0.1", port)
        await conn.open(tg)
        with pytest.raises(KafkaConnectionError, match="correlation id"):
            await conn.request(ApiKey.METADATA, {"topics": None})
        assert not conn.connected
        tg.cancel_scope.cancel()


async def test_connection_refused_is_a_connection_error() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()
    async with anyio.create_task_group() as tg:
        with pytest.raises(KafkaConnectionError, match="cannot connect"):
            await BrokerConnection("127.0.0.1", port).open(tg)
