"""Reading the end-transaction marker of a control batch without decoding anything else.

A marker batch is uncompressed and holds one record (key: version int16, type int16; value: version int16,
coordinator_epoch int32). Only the first record is read, as Kafka's ProducerAppendInfo does.
"""

from __future__ import annotations

from typing import NamedTuple

from oncelog.protocol.records.batch import BATCH_HEADER_SIZE, BatchHeader, InvalidBatchError
from oncelog.protocol.records.codec import decode_varint
from oncelog.protocol.records.control import ControlType, decode_control_record
from oncelog.storage.errors import InvalidRecordError


class EndTxnMarker(NamedTuple):
    control_type: ControlType
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type == ControlType.ABORT


def read_end_txn_marker(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> EndTxnMarker:
    """The marker in the control batch at ``pos`` of ``buf`` (whose ``header`` is given).

    Raises InvalidRecordError for a compressed batch, a malformed first record or a control type other than
    ABORT/COMMIT.
    """
    if header.compression:
        raise InvalidRecordError("control batches must not be compressed")
    end = pos + header.size
    data = bytes(buf[pos + BATCH_HEADER_SIZE : end])
    try:
        length, p = decode_varint(data, 0, 5)
        if length < 0 or p + length > len(data):
            raise InvalidBatchError("control record overruns its batch")
        p += 1  # attributes
        _ts_delta, p = decode_varint(data, p, 10)
        _off_delta, p = decode_varint(data, p, 5)
        key_len, p = decode_varint(data, p, 5)
        key = data[p : p + key_len] if key_len >= 0 else None
        p += max(key_len, 0)
        value_len, p = decode_varint(data, p, 5)
        value = data[p : p + value_len] if value_len >= 0 else None
        if p + max(value_len, 0) > len(data):
            raise InvalidBatchError("control record value overruns its batch")
        control_type, coordinator_epoch = decode_control_record(key, value)
    except (InvalidBatchError, IndexError) as exc:
        raise InvalidRecordError(f"invalid transaction marker: {exc}") from exc
    return EndTxnMarker(control_type, coordinator_epoch)
