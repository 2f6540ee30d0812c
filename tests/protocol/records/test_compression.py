"""Codec formats as Kafka clients write them, and the decompression guard."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import pytest
from oncelog.protocol.records.batch import InvalidBatchError
from oncelog.protocol.records.compression import (
    XERIAL_BLOCK_SIZE,
    XERIAL_MAGIC,
    Compression,
    DecompressionError,
    compress,
    decompress,
    xxh32,
)

PAYLOADS = {
    "empty": b"",
    "one": b"x",
    "text": b"the quick brown fox " * 5000,  # 100 KB, compressible, spans several blocks
    "random": os.urandom(150_000),  # incompressible: lz4 stores blocks raw
}


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("name", list(PAYLOADS))
def test_round_trip(codec: Compression, name: str) -> None:
    data = PAYLOADS[name]
    assert decompress(codec, compress(codec, data)) == data


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.LZ4, Compression.ZSTD])
def test_levels_round_trip(codec: Compression) -> None:
    data = PAYLOADS["text"]
    for level in (1, 9 if codec != Compression.ZSTD else 19):
        assert decompress(codec, compress(codec, data, level=level)) == data


def test_xxh32_known_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


def test_gzip_is_an_rfc1952_stream_readable_by_stdlib() -> None:
    data = PAYLOADS["text"]
    z = compress(Compression.GZIP, data)
    assert z[:3] == b"\x1f\x8b\x08"
    assert gzip.decompress(z) == data
    # Concatenated members (Java's GZIPInputStream reads them all).
    assert decompress(Compression.GZIP, gzip.compress(b"ab") + gzip.compress(b"cd")) == b"abcd"


def test_snappy_writes_xerial_framing_like_java() -> None:
    data = PAYLOADS["text"]
    z = compress(Compression.SNAPPY, data)
    assert z[:8] == XERIAL_MAGIC == b"\x82SNAPPY\x00"
    assert struct.unpack(">ii", z[8:16]) == (1, 1)
    pos, out, blocks = 16, b"", 0
    while pos < len(z):
        (n,) = struct.unpack_from(">i", z, pos)
        out += bytes(cramjam.snappy.decompress_raw(z[pos + 4 : pos + 4 + n]))
        pos += 4 + n
        blocks += 1
    assert out == data
    assert blocks == -(-len(data) // XERIAL_BLOCK_SIZE)


def test_snappy_decodes_raw_blocks_like_librdkafka_writes() -> None:
    data = PAYLOADS["text"]
    assert decompress(Compression.SNAPPY, bytes(cramjam.snappy.compress_raw(data))) == data


def test_lz4_frame_header_matches_kafka() -> None:
    z = compress(Compression.LZ4, b"hello")
    # magic, FLG = version 1 + block independence, BD = 64 KiB, HC = (xxh32(FLG BD) >> 8) & 0xFF
    assert z[:7] == bytes.fromhex("04224d18604082")
    assert z[6] == (xxh32(z[4:6]) >> 8) & 0xFF
    assert z.endswith(b"\x00\x00\x00\x00")


def test_lz4_reads_linked_blocks_and_checksums() -> None:
    data = PAYLOADS["text"] + PAYLOADS["random"]
    framed = bytes(cramjam.lz4.compress(data))  # linked blocks, block + content checksums
    assert not framed[4] & 0x20
    assert decompress(Compression.LZ4, framed) == data


def _lz4_frame_with_content_size(data: bytes) -> bytes:
    descriptor = bytes((0x60 | 0x08, 0x40)) + struct.pack("<Q", len(data))
    block = bytes(cramjam.lz4.compress_block(data, store_size=False))
    hc = (xxh32(descriptor) >> 8) & 0xFF
    return struct.pack("<I", 0x184D2204) + descriptor + bytes((hc,)) + struct.pack("<I", len(block)) + block + bytes(4)


def test_lz4_reads_content_size_and_checks_header_checksum() -> None:
    frame = _lz4_frame_with_content_size(b"abc" * 100)
    assert decompress(Compression.LZ4, frame) == b"abc" * 100
    bad = bytearray(frame)
    bad[14] ^= 0xFF  # the HC byte
    with pytest.raises(DecompressionError, match="checksum"):
        decompress(Compression.LZ4, bytes(bad))


def test_lz4_content_size_above_limit_is_refused_early() -> None:
    frame = bytearray(_lz4_frame_with_content_size(b"abc"))
    struct.pack_into("<Q", frame, 6, 1 << 40)
    frame[14] = (xxh32(bytes(frame[4:14])) >> 8) & 0xFF
    with pytest.raises(DecompressionError, match="limit"):
        decompress(Compression.LZ4, bytes(frame))


def test_zstd_with_and_without_content_size() -> None:
    data = PAYLOADS["text"]
    with_size = bytes(cramjam.zstd.compress(data))
    assert with_size[4] & 0xC0  # frame content size present
    assert decompress(Compression.ZSTD, with_size) == data
    streamed = cramjam.zstd.Compressor()
    streamed.compress(data)
    no_size = bytes(streamed.finish())
    assert decompress(Compression.ZSTD, no_size) == data


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_decompression_bomb_guard(codec: Compression) -> None:
    bomb = compress(codec, bytes(4_000_000))
    assert len(bomb) < 250_000
    assert decompress(codec, bomb, max_size=4_000_000) == bytes(4_000_000)
    with pytest.raises(DecompressionError, match="limit"):
        decompress(codec, bomb, max_size=1_000_000)


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
@pytest.mark.parametrize("garbage", [b"", b"\x00", b"\xff" * 40, XERIAL_MAGIC + b"\x00" * 12 + b"\x7f\xff\xff\xff"])
def test_garbage_raises_decompression_error(codec: Compression, garbage: bytes) -> None:
    if codec == Compression.SNAPPY and garbage == b"\x00":
        assert decompress(codec, garbage) == b""  # a valid raw snappy block of length 0
        return
    with pytest.raises(DecompressionError):
        decompress(codec, garbage)


@pytest.mark.parametrize("codec", [c for c in Compression if c != Compression.NONE])
def test_every_truncation_raises_only_decompression_error(codec: Compression) -> None:
    z = compress(codec, PAYLOADS["text"][:20_000] + PAYLOADS["random"][:3000])
    for cut in range(0, len(z), max(1, len(z) // 300)):
        try:
            out = decompress(codec, z[:cut])
        except DecompressionError:
            continue
        # Only xerial snappy may end cleanly at a block boundary; the result is then a prefix.
        assert codec == Compression.SNAPPY
        assert PAYLOADS["text"].startswith(out)


def test_unknown_codec() -> None:
    with pytest.raises(DecompressionError) as info:
        decompress(5, b"abc")
    assert isinstance(info.value, InvalidBatchError)
    with pytest.raises(ValueError):
        compress(7, b"abc")


@pytest.mark.parametrize(
    ("codec", "module", "inflater"),
    [(Compression.ZSTD, cramjam.zstd, "decompress"), (Compression.SNAPPY, cramjam.snappy, "decompress_raw")],
)
def test_bomb_is_refused_before_inflating(
    codec: Compression, module: object, inflater: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    bomb = compress(codec, bytes(4_000_000))

    def explode(*args: object, **kwargs: object) -> bytes:
        raise AssertionError("inflated despite the size guard")

    monkeypatch.setattr(module, inflater, explode)
    with pytest.raises(DecompressionError, match="limit"):
        decompress(codec, bomb, max_size=1_000_000)
