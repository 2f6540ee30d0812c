"""Compression codecs of a v2 record batch's records section, in the byte formats Kafka clients use.

* gzip: an RFC 1952 stream (Java's GZIPOutputStream); concatenated members are accepted.
* snappy: Java clients write xerial-snappy framing (``\\x82SNAPPY\\x00``, int32 version, int32 compatible
  version, then ``[int32 length][raw snappy block]...``); librdkafka writes one raw snappy block. Both decode;
  :func:`compress` writes the xerial framing, as the Java producer does.
* lz4: the LZ4 frame format with independent blocks, as Kafka's Lz4BlockOutputStream and librdkafka write
  it (FLG version 1, block independence, 64 KiB blocks, correct header checksum, no content size). Java
  consumers reject linked blocks, so we never write them; we do read them.
* zstd: standard zstd frames; the content size may be absent (Java's streaming writer omits it).

Every decoder checks, before it inflates anything, that the output cannot exceed ``max_size`` (a
decompression-bomb guard), and raises :class:`DecompressionError` (an InvalidBatchError) for bad input.
"""

from __future__ import annotations

import enum
import struct
import zlib
from collections.abc import Generator, Iterator

import cramjam
import zstandard
from oncelog.protocol.records.batch import InvalidBatchError

#: Default cap on a decompressed records section. Kafka has no such limit of its own; 64 MiB is well above
#: message.max.bytes (default 1048588) times any realistic compression ratio for one batch.
DEFAULT_MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024


class Compression(enum.IntEnum):
    """Codec ids of batch attribute bits 0-2 (compression.type)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class DecompressionError(InvalidBatchError):
    """The compressed records section is corrupt, of an unknown codec, or would inflate beyond the cap."""


def compress(codec: int, data: bytes | bytearray | memoryview, *, level: int | None = None) -> bytes:
    """Compress ``data`` with ``codec`` in the format Kafka's Java producer writes.

    ``level`` is compression.<codec>.level (KIP-390); None picks Kafka's default for the codec.
    Raises ValueError for an unknown codec.
    """
    if codec == Compression.NONE:
        return bytes(data)
    if codec == Compression.GZIP:
        return _gzip_compress(data, level)
    if codec == Compression.SNAPPY:
        return _xerial_compress(data)
    if codec == Compression.LZ4:
        return _lz4_compress(data, level)
    if codec == Compression.ZSTD:
        return bytes(cramjam.zstd.compress(bytes(data), level=ZSTD_DEFAULT_LEVEL if level is None else level))
    raise ValueError(f"unknown compression codec {codec}")


def decompress(
    codec: int, data: bytes | bytearray | memoryview, *, max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE
) -> bytes:
    """Inverse of :func:`compress`; also reads raw snappy and linked-block lz4 frames.

    Guarantees the result is at most ``max_size`` bytes; raises DecompressionError otherwise or for any
    malformed input (never another exception type).
    """
    data = bytes(data)
    try:
        if codec == Compression.NONE:
            out = data
        elif codec == Compression.GZIP:
            out = _gzip_decompress(data, max_size)
        elif codec == Compression.SNAPPY:
            out = _snappy_decompress(data, max_size)
        elif codec == Compression.LZ4:
            out = _lz4_decompress(data, max_size)
        elif codec == Compression.ZSTD:
            out = _zstd_decompress(data, max_size)
        else:
            raise DecompressionError(f"unsupported compression codec {codec}")
    except DecompressionError:
        raise
    except (cramjam.DecompressionError, zlib.error, ValueError, IndexError, struct.error) as exc:
        raise DecompressionError(f"corrupt {_name(codec)} data: {exc}") from exc
    if len(out) > max_size:
        raise _too_big(len(out), max_size)
    return out


def _name(codec: int) -> str:
    try:
        return Compression(codec).name.lower()
    except ValueError:
        return f"codec {codec}"


class DecompressionLimitError(DecompressionError):
    """The records section would inflate beyond the cap it was given."""


def _too_big(size: int, max_size: int) -> DecompressionError:
    return DecompressionLimitError(f"decompressed size would reach {size} bytes, above the limit of {max_size}")


# --- gzip --------------------------------------------------------------------------------------------------

#: compression.gzip.level default: Deflater.DEFAULT_COMPRESSION (= zlib level 6).
GZIP_DEFAULT_LEVEL = 6
_GZIP_WBITS = 31  # zlib: gzip container, 32 KiB window
_GZIP_MAGIC = b"\x1f\x8b"


def _gzip_compress(data: bytes | bytearray | memoryview, level: int | None) -> bytes:
    comp = zlib.compressobj(GZIP_DEFAULT_LEVEL if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
    return comp.compress(data) + comp.flush()


def _gzip_decompress(data: bytes, max_size: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    rest = data
    while True:
        inflater = zlib.decompressobj(_GZIP_WBITS)
        chunk = inflater.decompress(rest, max_size - total + 1)
        total += len(chunk)
        parts.append(chunk)
        if total > max_size:
            raise _too_big(total, max_size)
        if not inflater.eof:
            raise DecompressionError("truncated gzip stream")
        rest = inflater.unused_data
        if not rest:
            return b"".join(parts)
        if not rest.startswith(_GZIP_MAGIC):
            raise DecompressionError("trailing bytes after gzip stream")


# --- snappy ------------------------------------------------------------------------------------------------

#: xerial snappy-java stream header: magic, then int32 version and int32 minimum compatible version (both 1).
XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_HEADER_SIZE = len(_XERIAL_HEADER)
#: snappy-java SnappyOutputStream default block size (32 KiB), which Kafka's Java producer uses.
XERIAL_BLOCK_SIZE = 32 * 1024
_INT32 = struct.Struct(">i")


def _xerial_compress(data: bytes | bytearray | memoryview) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes, max_size: int) -> bytes:
    return b"".join(_snappy_stream(data, max_size))


def _raw_snappy(block: bytes, max_size: int, already: int) -> bytes:
    """One raw snappy block; its varint preamble gives the exact output size, checked before inflating."""
    size = cramjam.snappy.decompress_raw_len(block)
    if already + size > max_size:
        raise _too_big(already + size, max_size)
    return bytes(cramjam.snappy.decompress_raw(block))


# --- lz4 ---------------------------------------------------------------------------------------------------

LZ4_MAGIC = 0x184D2204
#: Skippable frames (LZ4 frame format section "Skippable Frames") have magics 0x184D2A50..0x184D2A5F.
_LZ4_SKIPPABLE_MASK = 0xFFFFFFF0
_LZ4_SKIPPABLE_MAGIC = 0x184D2A50
#: compression.lz4.level default 9 (Kafka uses lz4-java's fast compressor at the default level).
LZ4_DEFAULT_LEVEL = 9
_LZ4_FLG_VERSION = 0x40  # version 01 in bits 7-6
_LZ4_FLG_BLOCK_INDEPENDENT = 0x20
_LZ4_FLG_BLOCK_CHECKSUM = 0x10
_LZ4_FLG_CONTENT_SIZE = 0x08
_LZ4_FLG_CONTENT_CHECKSUM = 0x04
_LZ4_FLG_RESERVED = 0x02
_LZ4_FLG_DICT_ID = 0x01
_LZ4_BD_64KB = 4 << 4  # Kafka's Lz4BlockOutputStream.BLOCKSIZE_64KB
_LZ4_UNCOMPRESSED_BIT = 0x80000000
_UINT32_LE = struct.Struct("<I")
_UINT64_LE = struct.Struct("<Q")


def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 of ``data`` (pure Python; used only on the few bytes of an LZ4 frame descriptor)."""
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    n = len(data)
    pos = 0
    if n >= 16:
        v = [(seed + p1 + p2) & mask, (seed + p2) & mask, seed & mask, (seed - p1) & mask]
        while pos + 16 <= n:
            for i in range(4):
                lane = int.from_bytes(data[pos : pos + 4], "little")
                v[i] = (rotl((v[i] + lane * p2) & mask, 13) * p1) & mask
                pos += 4
        acc = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & mask
    else:
        acc = (seed + p5) & mask
    acc = (acc + n) & mask
    while pos + 4 <= n:
        acc = (rotl((acc + int.from_bytes(data[pos : pos + 4], "little") * p3) & mask, 17) * p4) & mask
        pos += 4
    while pos < n:
        acc = (rotl((acc + data[pos] * p5) & mask, 11) * p1) & mask
        pos += 1
    acc ^= acc >> 15
    acc = (acc * p2) & mask
    acc ^= acc >> 13
    acc = (acc * p3) & mask
    acc ^= acc >> 16
    return acc


def _lz4_header_checksum(descriptor: bytes) -> int:
    """HC byte: second byte of XXH32 over the frame descriptor (FLG, BD and optional fields), seed 0."""
    return (xxh32(descriptor) >> 8) & 0xFF


_LZ4_DESCRIPTOR = bytes((_LZ4_FLG_VERSION | _LZ4_FLG_BLOCK_INDEPENDENT, _LZ4_BD_64KB))
_LZ4_FRAME_HEADER = _UINT32_LE.pack(LZ4_MAGIC) + _LZ4_DESCRIPTOR + bytes((_lz4_header_checksum(_LZ4_DESCRIPTOR),))
_LZ4_BLOCK_SIZE = 64 * 1024
_LZ4_END_MARK = b"\x00\x00\x00\x00"


def _lz4_compress(data: bytes | bytearray | memoryview, level: int | None) -> bytes:
    view = memoryview(data)
    parts = [_LZ4_FRAME_HEADER]
    high = level is not None and level != LZ4_DEFAULT_LEVEL
    for start in range(0, len(view), _LZ4_BLOCK_SIZE):
        chunk = view[start : start + _LZ4_BLOCK_SIZE]
        if high:
            block = cramjam.lz4.compress_block(chunk, mode="high_compression", compression=level, store_size=False)
        else:
            block = cramjam.lz4.compress_block(chunk, store_size=False)
        block = bytes(block)
        if len(block) >= len(chunk):  # incompressible: store the block as is
            parts.append(_UINT32_LE.pack(len(chunk) | _LZ4_UNCOMPRESSED_BIT))
            parts.append(bytes(chunk))
        else:
            parts.append(_UINT32_LE.pack(len(block)))
            parts.append(block)
    parts.append(_LZ4_END_MARK)
    return b"".join(parts)


def _lz4_decompress(data: bytes, max_size: int) -> bytes:
    out = bytearray()
    pos = 0
    end = len(data)
    if end == 0:
        raise DecompressionError("empty lz4 data")
    while pos < end:
        pos = _lz4_frame(data, pos, out, max_size)
    return bytes(out)


def _lz4_frame(data: bytes, pos: int, out: bytearray, max_size: int) -> int:
    """Decode one frame at ``pos`` appending to ``out``; return the position after it."""
    pieces = _lz4_frame_pieces(data, pos, max_size - len(out))
    while True:
        try:
            out += next(pieces)
        except StopIteration as stop:
            return stop.value


def _lz4_frame_pieces(data: bytes, pos: int, max_size: int) -> Generator[bytes, None, int]:
    """Yield the frame at ``pos`` block by block (a frame of linked blocks whole, once bounded), at most
    ``max_size`` bytes in all; return the position after it."""
    end = len(data)
    if end - pos < 7:
        raise DecompressionError("truncated lz4 frame header")
    (magic,) = _UINT32_LE.unpack_from(data, pos)
    if magic & _LZ4_SKIPPABLE_MASK == _LZ4_SKIPPABLE_MAGIC:
        (size,) = _UINT32_LE.unpack_from(data, pos + 4)
        if size > end - pos - 8:
            raise DecompressionError("truncated lz4 skippable frame")
        return pos + 8 + size
    if magic != LZ4_MAGIC:
        raise DecompressionError(f"bad lz4 frame magic {magic:#x}")
    frame_start = pos
    flg, bd = data[pos + 4], data[pos + 5]
    if flg & 0xC0 != _LZ4_FLG_VERSION or flg & _LZ4_FLG_RESERVED:
        raise DecompressionError(f"unsupported lz4 frame descriptor FLG {flg:#x}")
    if flg & _LZ4_FLG_DICT_ID:
        raise DecompressionError("lz4 frames with a dictionary id are not supported")
    if bd & 0x8F or not 4 <= (bd >> 4) <= 7:
        raise DecompressionError(f"bad lz4 block descriptor BD {bd:#x}")
    block_max = 1 << (2 * (bd >> 4) + 8)
    desc_end = pos + 6 + (8 if flg & _LZ4_FLG_CONTENT_SIZE else 0)
    if desc_end + 1 > end:
        raise DecompressionError("truncated lz4 frame descriptor")
    if flg & _LZ4_FLG_CONTENT_SIZE:
        (content_size,) = _UINT64_LE.unpack_from(data, pos + 6)
        if content_size > max_size:
            raise _too_big(content_size, max_size)
    if data[desc_end] != _lz4_header_checksum(data[pos + 4 : desc_end]):
        raise DecompressionError("lz4 frame header checksum mismatch")
    pos = desc_end + 1
    block_checksum = 4 if flg & _LZ4_FLG_BLOCK_CHECKSUM else 0
    independent = bool(flg & _LZ4_FLG_BLOCK_INDEPENDENT)
    bound = 0
    written = 0
    while True:
        if end - pos < 4:
            raise DecompressionError("truncated lz4 block header")
        (word,) = _UINT32_LE.unpack_from(data, pos)
        pos += 4
        if word == 0:
            break
        size = word & ~_LZ4_UNCOMPRESSED_BIT
        if size > block_max or size + block_checksum > end - pos:
            raise DecompressionError(f"lz4 block size {size} is too large or truncated")
        block = data[pos : pos + size]
        pos += size + block_checksum
        bound += size if word & _LZ4_UNCOMPRESSED_BIT else block_max
        if not independent:
            continue  # linked blocks: only bound the size here; the whole frame inflates below
        if word & _LZ4_UNCOMPRESSED_BIT:
            piece = block
        else:
            target = bytearray(block_max)
            piece = bytes(memoryview(target)[: cramjam.lz4.decompress_block_into(block, target)])
        written += len(piece)
        if written > max_size:
            raise _too_big(written, max_size)
        yield piece
    if flg & _LZ4_FLG_CONTENT_CHECKSUM:
        if end - pos < 4:
            raise DecompressionError("truncated lz4 content checksum")
        pos += 4
    if not independent:
        if bound > max_size:
            raise _too_big(bound, max_size)
        yield bytes(cramjam.lz4.decompress(data[frame_start:pos]))
    return pos


# --- zstd --------------------------------------------------------------------------------------------------

#: compression.zstd.level default 3 (zstd's ZSTD_CLEVEL_DEFAULT).
ZSTD_DEFAULT_LEVEL = 3
ZSTD_MAGIC = 0xFD2FB528
#: RFC 8878 section 3.1.1.2: Block_Maximum_Size is at most 128 KiB.
_ZSTD_MAX_BLOCK = 128 * 1024
_ZSTD_SKIPPABLE_MASK = 0xFFFFFFF0
_ZSTD_SKIPPABLE_MAGIC = 0x184D2A50
_ZSTD_FCS_SIZES = (0, 2, 4, 8)
_ZSTD_DICT_ID_SIZES = (0, 1, 2, 4)


def _zstd_bound(data: bytes) -> int:
    """Walk the frames and blocks (RFC 8878 section 3.1) and return an upper bound of the output size."""
    pos = 0
    end = len(data)
    bound = 0
    if end == 0:
        raise DecompressionError("empty zstd data")
    while pos < end:
        if end - pos < 5:
            raise DecompressionError("truncated zstd frame header")
        (magic,) = _UINT32_LE.unpack_from(data, pos)
        if magic & _ZSTD_SKIPPABLE_MASK == _ZSTD_SKIPPABLE_MAGIC:
            if end - pos < 8:
                raise DecompressionError("truncated zstd skippable frame")
            (size,) = _UINT32_LE.unpack_from(data, pos + 4)
            if size > end - pos - 8:
                raise DecompressionError("truncated zstd skippable frame")
            pos += 8 + size
            continue
        if magic != ZSTD_MAGIC:
            raise DecompressionError(f"bad zstd frame magic {magic:#x}")
        fhd = data[pos + 4]
        if fhd & 0x08:
            raise DecompressionError("zstd frame header reserved bit is set")
        single_segment = bool(fhd & 0x20)
        fcs_size = _ZSTD_FCS_SIZES[fhd >> 6]
        if fcs_size == 0 and single_segment:
            fcs_size = 1
        pos += 5 + (0 if single_segment else 1) + _ZSTD_DICT_ID_SIZES[fhd & 0x03] + fcs_size
        while True:
            if end - pos < 3:
                raise DecompressionError("truncated zstd block header")
            header = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16)
            pos += 3
            last = header & 1
            block_type = (header >> 1) & 3
            size = header >> 3
            if block_type == 3:
                raise DecompressionError("reserved zstd block type")
            if size > _ZSTD_MAX_BLOCK:
                raise DecompressionError(f"zstd block size {size} above the 128 KiB maximum")
            if block_type == 1:  # RLE: one byte repeated ``size`` times
                bound += size
                pos += 1
            else:
                bound += size if block_type == 0 else _ZSTD_MAX_BLOCK
                pos += size
            if pos > end:
                raise DecompressionError("truncated zstd block")
            if last:
                break
        if fhd & 0x04:
            pos += 4  # content checksum
            if pos > end:
                raise DecompressionError("truncated zstd content checksum")
    return bound


def _zstd_decompress(data: bytes, max_size: int) -> bytes:
    bound = _zstd_bound(data)
    if bound > max_size:
        raise _too_big(bound, max_size)
    return bytes(cramjam.zstd.decompress(data))


# --- streaming ---------------------------------------------------------------------------------------------

#: Largest piece :func:`iter_decompressed` inflates at a time from a gzip or zstd stream.
STREAM_CHUNK_SIZE = 1024 * 1024


def iter_decompressed(
    codec: int,
    data: bytes | bytearray | memoryview,
    *,
    max_size: int = DEFAULT_MAX_DECOMPRESSED_SIZE,
    chunk_size: int = STREAM_CHUNK_SIZE,
) -> Iterator[bytes]:
    """Inflate ``data`` piece by piece, as :func:`decompress` would whole.

    Guarantees: no piece is larger than ``chunk_size`` for gzip and zstd, than one block (at most 4 MiB) for lz4
    frames of independent blocks, than one block's declared size for snappy; a raw snappy block, a zstd frame
    structure and linked lz4 blocks are bounded before any byte is inflated. The pieces never add up to more than
    ``max_size``: DecompressionError is raised first, as for any malformed input (never another exception type).
    """
    data = bytes(data)
    try:
        if codec == Compression.GZIP:
            yield from _gzip_stream(data, max_size, chunk_size)
        elif codec == Compression.ZSTD:
            yield from _zstd_stream(data, max_size, chunk_size)
        elif codec == Compression.LZ4:
            yield from _lz4_stream(data, max_size)
        elif codec == Compression.SNAPPY:
            yield from _snappy_stream(data, max_size)
        elif codec == Compression.NONE:
            if len(data) > max_size:
                raise _too_big(len(data), max_size)
            yield data
        else:
            raise DecompressionError(f"unsupported compression codec {codec}")
    except DecompressionError:
        raise
    except (cramjam.DecompressionError, zlib.error, zstandard.ZstdError, ValueError, IndexError, struct.error) as exc:
        raise DecompressionError(f"corrupt {_name(codec)} data: {exc}") from exc


def _gzip_stream(data: bytes, max_size: int, chunk_size: int) -> Iterator[bytes]:
    total = 0
    rest = data
    while True:
        inflater = zlib.decompressobj(_GZIP_WBITS)
        pending = rest
        while not inflater.eof:
            chunk = inflater.decompress(pending, min(chunk_size, max_size - total + 1))
            pending = inflater.unconsumed_tail
            if not chunk:
                if not pending:
                    raise DecompressionError("truncated gzip stream")
                continue
            total += len(chunk)
            if total > max_size:
                raise _too_big(total, max_size)
            yield chunk
        rest = inflater.unused_data
        if not rest:
            return
        if not rest.startswith(_GZIP_MAGIC):
            raise DecompressionError("trailing bytes after gzip stream")


#: The largest zstd window accepted (zstd's own default decoder limit, ZSTD_WINDOWLOG_LIMIT_DEFAULT = 27).
ZSTD_MAX_WINDOW_SIZE = 1 << 27
_ZSTD_DECOMPRESSOR = zstandard.ZstdDecompressor(max_window_size=ZSTD_MAX_WINDOW_SIZE)


def _zstd_stream(data: bytes, max_size: int, chunk_size: int) -> Iterator[bytes]:
    bound = _zstd_bound(data)  # frame structure first: truncation, trailing garbage, and the most it can inflate to
    if bound > max_size:
        raise _too_big(bound, max_size)
    reader = _ZSTD_DECOMPRESSOR.stream_reader(data, read_across_frames=True)
    while chunk := reader.read(chunk_size):
        yield chunk


def _lz4_stream(data: bytes, max_size: int) -> Iterator[bytes]:
    pos = 0
    end = len(data)
    total = 0
    if end == 0:
        raise DecompressionError("empty lz4 data")
    while pos < end:
        pieces = _lz4_frame_pieces(data, pos, max_size - total)
        while True:
            try:
                piece = next(pieces)
            except StopIteration as stop:
                pos = stop.value
                break
            total += len(piece)
            yield piece


def _snappy_stream(data: bytes, max_size: int) -> Iterator[bytes]:
    """Raw snappy whole; xerial framing block by block, once the blocks' declared sizes are summed (nothing inflates
    when they exceed ``max_size``)."""
    if not (len(data) >= _XERIAL_HEADER_SIZE and data.startswith(XERIAL_MAGIC)):
        yield _raw_snappy(data, max_size, 0)
        return
    blocks = _xerial_blocks(data)
    total = sum(cramjam.snappy.decompress_raw_len(block) for block in blocks)
    if total > max_size:
        raise _too_big(total, max_size)
    for block in blocks:
        yield bytes(cramjam.snappy.decompress_raw(block))


def _xerial_blocks(data: bytes) -> list[memoryview]:
    """The raw snappy blocks of a xerial stream (views into ``data``)."""
    view = memoryview(data)
    pos = _XERIAL_HEADER_SIZE
    end = len(data)
    blocks = []
    while pos < end:
        if end - pos < 4:
            raise DecompressionError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or length > end - pos:
            raise DecompressionError(f"xerial snappy block length {length} exceeds the remaining bytes")
        blocks.append(view[pos : pos + length])
        pos += length
    return blocks


class StreamCompressor:
    """Compress a records section fed piece by piece, in the format :func:`compress` writes whole.

    Holds at most one block of input (64 KiB for lz4, 32 KiB for snappy) beside the compressed output so far, whose
    size ``compressed_size`` tells, so a caller can stop as soon as the output is too large.
    """

    def __init__(self, codec: int, level: int | None = None) -> None:
        if codec not in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
            raise ValueError(f"unknown compression codec {codec}")
        self.codec = codec
        self._level = level
        self._parts: list[bytes] = []
        self.compressed_size = 0
        self._pending = bytearray()
        if codec == Compression.GZIP:
            self._zlib = zlib.compressobj(GZIP_DEFAULT_LEVEL if level is None else level, zlib.DEFLATED, _GZIP_WBITS)
        elif codec == Compression.ZSTD:
            self._zstd = zstandard.ZstdCompressor(level=ZSTD_DEFAULT_LEVEL if level is None else level).compressobj()
        elif codec == Compression.SNAPPY:
            self._emit(_XERIAL_HEADER)
        else:
            self._emit(_LZ4_FRAME_HEADER)

    def _emit(self, part: bytes) -> None:
        if part:
            self._parts.append(part)
            self.compressed_size += len(part)

    def _blocks(self, final: bool) -> None:
        size = XERIAL_BLOCK_SIZE if self.codec == Compression.SNAPPY else _LZ4_BLOCK_SIZE
        pending = self._pending
        start = 0
        while len(pending) - start >= size or (final and start < len(pending)):
            piece = bytes(pending[start : start + size])
            start += len(piece)
            if self.codec == Compression.SNAPPY:
                self._emit(_xerial_compress(piece)[_XERIAL_HEADER_SIZE:])
            else:
                self._emit(_lz4_compress(piece, self._level)[len(_LZ4_FRAME_HEADER) : -len(_LZ4_END_MARK)])
        del pending[:start]

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Compress ``data`` after what was fed before."""
        if self.codec == Compression.GZIP:
            self._emit(self._zlib.compress(data))
        elif self.codec == Compression.ZSTD:
            self._emit(self._zstd.compress(data))
        else:
            self._pending += data
            self._blocks(final=False)

    def finish(self) -> bytes:
        """The whole compressed stream; the compressor is spent."""
        if self.codec == Compression.GZIP:
            self._emit(self._zlib.flush())
        elif self.codec == Compression.ZSTD:
            self._emit(self._zstd.flush())
        else:
            self._blocks(final=True)
            if self.codec == Compression.LZ4:
                self._emit(_LZ4_END_MARK)
        return b"".join(self._parts)
