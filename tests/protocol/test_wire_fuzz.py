"""Malformed input: only DecodeError / UnsupportedVersionError escape, and nothing huge is allocated."""

from __future__ import annotations

import contextlib
import functools
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oncelog.protocol import (
    DECLARED_VERSIONS,
    SCHEMAS,
    ApiKey,
    DecodeError,
    UnsupportedVersionError,
    decode_request,
    decode_request_header,
    decode_response,
    encode_request,
    encode_response,
)
from support.wire_samples import sample

CASES = [(key, v) for key, (lo, hi) in sorted(DECLARED_VERSIONS.items()) for v in range(lo, hi + 1)]
FAST = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@functools.cache
def _valid_request(key: ApiKey, version: int) -> bytes:
    return encode_request(key, version, 1, "c", sample(SCHEMAS[key][0].fields, version))


@functools.cache
def _valid_response(key: ApiKey, version: int) -> bytes:
    header = decode_request_header(encode_request(key, version, 1, None, {}), DECLARED_VERSIONS)
    return encode_response(header, sample(SCHEMAS[key][1].fields, version))


def _decoded(frame: bytes | memoryview) -> object:
    """The decoded request, or the class of the error it raised."""
    try:
        header = decode_request_header(frame, DECLARED_VERSIONS)
        return decode_request(header, frame)
    except (DecodeError, UnsupportedVersionError) as exc:
        return type(exc)


def _try_request(frame: bytes) -> None:
    # A memoryview frame is decoded in place (records as views): same outcome as from bytes.
    assert _decoded(memoryview(frame)) == _decoded(frame)


@FAST
@given(st.binary(max_size=200))
def test_arbitrary_bytes(frame: bytes) -> None:
    _try_request(frame)


@FAST
@given(st.sampled_from(CASES), st.binary(max_size=120))
def test_arbitrary_body_after_valid_header(case: tuple[ApiKey, int], body: bytes) -> None:
    key, version = case
    header = encode_request(key, version, 1, "c", {})
    _try_request(header[: len(header) - len(SCHEMAS[key][0].construct(version).build({}))] + body)
    with contextlib.suppress(DecodeError):
        decode_response(key, version, b"\x00\x00\x00\x01" + body)


@FAST
@given(st.sampled_from(CASES), st.data())
def test_truncations_and_mutations(case: tuple[ApiKey, int], data: st.DataObject) -> None:
    key, version = case
    for valid, is_request in ((_valid_request(key, version), True), (_valid_response(key, version), False)):
        cut = data.draw(st.integers(0, len(valid) - 1))
        pos = data.draw(st.integers(0, len(valid) - 1))
        flipped = valid[:pos] + bytes([valid[pos] ^ data.draw(st.integers(1, 255))]) + valid[pos + 1 :]
        for frame in (valid[:cut], flipped, valid + b"\x00"):
            if is_request:
                _try_request(frame)
            else:
                with contextlib.suppress(DecodeError):
                    decode_response(key, version, frame)
        with pytest.raises((DecodeError, UnsupportedVersionError)):
            if is_request:
                h = decode_request_header(valid[:cut], DECLARED_VERSIONS)
                decode_request(h, valid[:cut])
            else:
                decode_response(key, version, valid[:cut])
        if is_request:
            # Brokers ignore bytes after a request's last field, as Kafka does.
            h = decode_request_header(valid + b"\x00", DECLARED_VERSIONS)
            assert decode_request(h, valid + b"\x00") == decode_request(h, valid)
        else:
            with pytest.raises(DecodeError):
                decode_response(key, version, valid + b"\x00")


def test_huge_array_count_is_rejected_before_allocating() -> None:
    # Produce v3: null txn id, acks, timeout, then topic_data claiming 2^31-1 topics.
    frame = bytes.fromhex("0000 0003 00000001 ffff ffff ffff 00007530") + struct.pack(">i", 2**31 - 1)
    with pytest.raises(DecodeError, match="exceeds"):
        decode_request(decode_request_header(frame), frame)
    # Int32 array (Metadata replica nodes) and compact arrays / bytes claiming 2^32 - 2 elements.
    flexible = bytes.fromhex("0003 0009 00000001 ffff 00") + bytes.fromhex("feffffff0f")
    with pytest.raises(DecodeError):
        decode_request(decode_request_header(flexible), flexible)
    records = bytes.fromhex("0000 0003 00000001 ffff ffff ffff 0000753000000001 0001 74 00000001 00000000 7fffffff")
    with pytest.raises(DecodeError, match="exceeds"):
        decode_request(decode_request_header(records), records)


def test_overlong_varint_and_bad_utf8() -> None:
    frame = bytes.fromhex("0003 0009 00000001 ffff 00") + b"\xff" * 6
    with pytest.raises(DecodeError, match="varint"):
        decode_request(decode_request_header(frame), frame)
    bad = bytes.fromhex("0003 0001 00000002 ffff 00000001 0002 c328")
    with pytest.raises(DecodeError, match="UTF-8"):
        decode_request(decode_request_header(bad), bad)


def test_null_in_non_nullable_field_is_rejected() -> None:
    frame = bytes.fromhex("0003 0000 00000002 ffff ffffffff")  # Metadata v0 topics may not be null
    with pytest.raises(DecodeError):
        decode_request(decode_request_header(frame), frame)
