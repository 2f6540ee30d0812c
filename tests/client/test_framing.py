"""FrameReceiver: size-prefixed frames out of a byte stream, whatever pieces the stream delivers them in."""

from __future__ import annotations

import struct

import anyio
import pytest
from anyio.abc import ByteReceiveStream
from oncelog.client.framing import RECEIVE_BYTES, FrameReceiver, FrameSizeError

pytestmark = pytest.mark.anyio


class Pieces(ByteReceiveStream):
    """Delivers ``data`` in pieces of at most ``piece`` bytes (and at most what is asked), noting each ask."""

    def __init__(self, data: bytes, piece: int) -> None:
        self._data = data
        self._piece = piece
        self.asked: list[int] = []

    async def receive(self, max_bytes: int = 65536) -> bytes:
        self.asked.append(max_bytes)
        if not self._data:
            raise anyio.EndOfStream
        chunk, self._data = self._data[: min(self._piece, max_bytes)], self._data[min(self._piece, max_bytes) :]
        return chunk

    async def aclose(self) -> None:
        pass


def framed(*frames: bytes) -> bytes:
    return b"".join(struct.pack(">i", len(f)) + f for f in frames)


@pytest.mark.parametrize("piece", [1, 3, 7, 1 << 20])
async def test_frames_come_out_whole_and_in_order_however_the_bytes_are_cut(piece: int) -> None:
    frames = [b"", b"a", b"bc" * 100, bytes(range(256)) * 500]
    receiver = FrameReceiver(Pieces(framed(*frames), piece), max_bytes=1 << 20)
    assert [await receiver.next() for _ in frames] == frames


async def test_a_large_frame_is_asked_of_the_stream_in_one_receive() -> None:
    body = b"x" * (RECEIVE_BYTES * 5)
    stream = Pieces(framed(body), piece=1 << 30)
    assert await FrameReceiver(stream, max_bytes=1 << 30).next() == body
    assert len(stream.asked) == 2 and stream.asked[1] >= len(body) - RECEIVE_BYTES + 4


async def test_a_length_out_of_bounds_is_refused_and_the_end_of_the_stream_ends_a_frame() -> None:
    with pytest.raises(FrameSizeError):
        await FrameReceiver(Pieces(struct.pack(">i", 101) + b"x" * 101, 8), max_bytes=100).next()
    with pytest.raises(FrameSizeError):
        await FrameReceiver(Pieces(struct.pack(">i", -1), 8), max_bytes=100).next()
    with pytest.raises(anyio.EndOfStream):
        await FrameReceiver(Pieces(framed(b"abcdef")[:-2], 8), max_bytes=100).next()
