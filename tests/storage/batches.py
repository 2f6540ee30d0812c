"""Encode minimal valid v2 record batches for storage tests (header via struct, records with varints)."""

from __future__ import annotations

import struct

import crc32c
from oncelog.protocol.records import ControlType, encode_control_batch

_HEADER = struct.Struct(">qiibIhiqqqhii")
TRANSACTIONAL = 0x10
CONTROL = 0x20


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    out = bytearray()
    while True:
        byte = zigzag & 0x7F
        zigzag >>= 7
        if zigzag:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _record(offset_delta: int, value: bytes) -> bytes:
    body = b"\x00" + _varint(0) + _varint(offset_delta) + _varint(-1) + _varint(len(value)) + value + _varint(0)
    return _varint(len(body)) + body


def make_batch(
    count: int = 1,
    *,
    timestamp: int = 1000,
    value_size: int = 10,
    base_offset: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    value: bytes | None = None,
) -> bytes:
    """A v2 batch of ``count`` records, each ``value_size`` bytes (or ``value``), stamped ``timestamp``."""
    records = b"".join(_record(i, value if value is not None else bytes([i % 256]) * value_size) for i in range(count))
    length = _HEADER.size - 12 + len(records)
    header = bytearray(
        _HEADER.pack(
            base_offset,
            length,
            0,
            2,
            0,
            attributes,
            count - 1,
            timestamp,
            timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )
    )
    crc = crc32c.crc32c(bytes(header[21:]) + records)
    struct.pack_into(">I", header, 17, crc)
    return bytes(header) + records


def control_batch(
    producer_id: int,
    producer_epoch: int,
    *,
    commit: bool = True,
    timestamp: int = 1000,
    coordinator_epoch: int = 0,
) -> bytes:
    """An end-transaction marker batch (key: version 0, type 1 commit / 0 abort)."""
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, coordinator_epoch)
    body = b"\x00" + _varint(0) + _varint(0) + _varint(len(key)) + key + _varint(len(value)) + value + _varint(0)
    records = _varint(len(body)) + body
    length = _HEADER.size - 12 + len(records)
    header = bytearray(
        _HEADER.pack(
            0,
            length,
            0,
            2,
            0,
            CONTROL | TRANSACTIONAL,
            0,
            timestamp,
            timestamp,
            producer_id,
            producer_epoch,
            -1,
            1,
        )
    )
    struct.pack_into(">I", header, 17, crc32c.crc32c(bytes(header[21:]) + records))
    return bytes(header) + records


def producer_data(pid: int, seq: int, count: int = 2, *, epoch: int = 0, txn: bool = True, size: int = 20) -> bytes:
    """A batch of ``count`` records from producer ``pid`` (epoch ``epoch``) starting at sequence ``seq``."""
    return make_batch(
        count,
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
        attributes=TRANSACTIONAL if txn else 0,
        value_size=size,
    )


def txn_marker(pid: int, epoch: int = 0, *, commit: bool, coordinator_epoch: int = 0) -> bytes:
    """The COMMIT or ABORT marker of producer ``pid``'s transaction, as the coordinator writes it."""
    return encode_control_batch(
        ControlType.COMMIT if commit else ControlType.ABORT,
        producer_id=pid,
        producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch,
        timestamp_ms=1000,
    )
