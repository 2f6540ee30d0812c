"""Size-prefixed frames (Kafka's 4-byte big-endian length, then the frame) read from an anyio byte stream.

``FrameReceiver.next`` asks the stream for all that a frame still lacks in one ``receive`` (at least
``RECEIVE_BYTES``), so a frame of hundreds of kilobytes (a follower's or a consumer's Fetch answer) arrives in a few
reads and is copied once out of the buffer, where anyio's ``BufferedByteReceiveStream.receive_exactly`` reads 64 KiB
at a time and copies each frame twice more: measured on a loopback stream, 145 against 409 µs of CPU per 350 KB frame
(the sender included).

Guarantees: frames come out whole and in order; a length outside 0..``max_bytes`` raises ``FrameSizeError`` (nothing
more is read); the stream's end raises ``anyio.EndOfStream``, also in the middle of a frame.
"""

from __future__ import annotations

import struct

from anyio.abc import ByteReceiveStream

#: The least asked of the stream per receive: small answers arrive several to a read.
RECEIVE_BYTES = 65_536
_LENGTH = struct.Struct(">i")


class FrameSizeError(ValueError):
    """A frame's length prefix is negative or above the receiver's limit."""


class FrameReceiver:
    def __init__(self, stream: ByteReceiveStream, max_bytes: int) -> None:
        self._stream = stream
        self._max_bytes = max_bytes
        self._buffer = bytearray()

    async def next(self) -> bytes:
        """The next frame, without its length prefix."""
        buffer = self._buffer
        while len(buffer) < _LENGTH.size:
            buffer += await self._stream.receive(RECEIVE_BYTES)
        (size,) = _LENGTH.unpack_from(buffer)
        if not 0 <= size <= self._max_bytes:
            raise FrameSizeError(f"frame of {size} bytes (at most {self._max_bytes})")
        end = _LENGTH.size + size
        while len(buffer) < end:
            buffer += await self._stream.receive(max(end - len(buffer), RECEIVE_BYTES))
        with memoryview(buffer) as view:
            frame = bytes(view[_LENGTH.size : end])
        del buffer[:end]
        return frame
