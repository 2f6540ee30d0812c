"""Transaction markers: control batches holding one COMMIT or ABORT record.

Control record key (ControlRecordType): version int16 (0), type int16 (0 = ABORT, 1 = COMMIT).
Value (EndTransactionMarker): version int16 (0), coordinatorEpoch int32. The batch has the control and
transactional attribute bits set and carries the producer id and epoch of the transaction it ends.
"""

from __future__ import annotations

import enum
import struct

from oncelog.protocol.records.batch import NO_PARTITION_LEADER_EPOCH, NO_SEQUENCE, InvalidBatchError
from oncelog.protocol.records.codec import Record, encode_batch

#: ControlRecordType.CURRENT_CONTROL_RECORD_KEY_VERSION
CONTROL_KEY_VERSION = 0
#: EndTransactionMarker.CURRENT_END_TXN_MARKER_VERSION
END_TXN_MARKER_VERSION = 0

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlType(enum.IntEnum):
    """Control record types that end a transaction."""

    ABORT = 0
    COMMIT = 1


def encode_control_key(control_type: int) -> bytes:
    return _KEY.pack(CONTROL_KEY_VERSION, control_type)


def encode_control_value(coordinator_epoch: int) -> bytes:
    return _VALUE.pack(END_TXN_MARKER_VERSION, coordinator_epoch)


def encode_control_batch(
    control_type: ControlType | int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """One control batch (control + transactional bits, no sequence), its marker record at ``base_offset``."""
    control_type = ControlType(control_type)
    key = encode_control_key(control_type)
    record = Record(base_offset, timestamp_ms, key, encode_control_value(coordinator_epoch), [])
    return encode_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=NO_SEQUENCE,
        transactional=True,
        control=True,
        partition_leader_epoch=partition_leader_epoch,
    )


def control_record_type(key: bytes | None) -> int:
    """The raw type id of a control record key (any version >= 0, as Kafka reads it).

    Raises InvalidBatchError for a short key or a negative version.
    """
    if key is None or len(key) < _KEY.size:
        raise InvalidBatchError("control record key is shorter than 4 bytes")
    version, type_id = _KEY.unpack_from(key)
    if version < 0:
        raise InvalidBatchError(f"invalid control record key version {version}")
    return type_id


def decode_control_record(key: bytes | None, value: bytes | None) -> tuple[ControlType, int]:
    """Return ``(ControlType, coordinator_epoch)`` of a transaction marker record.

    Raises InvalidBatchError for a malformed key/value or a control type other than ABORT/COMMIT (e.g.
    KRaft's LEADER_CHANGE); use :func:`control_record_type` to look at the type without failing.
    """
    type_id = control_record_type(key)
    try:
        control_type = ControlType(type_id)
    except ValueError:
        raise InvalidBatchError(f"control record type {type_id} is not a transaction marker") from None
    if value is None or len(value) < _VALUE.size:
        raise InvalidBatchError("transaction marker value is shorter than 6 bytes")
    version, coordinator_epoch = _VALUE.unpack_from(value)
    if version < 0:
        raise InvalidBatchError(f"invalid transaction marker version {version}")
    return control_type, coordinator_epoch
