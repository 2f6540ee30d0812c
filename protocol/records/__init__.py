"""oncelog.protocol.records: RecordBatch v2 header, record codec, compression and control records."""

from oncelog.protocol.records.batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    InvalidBatchError,
    iter_headers,
    parse_header,
    validate_batch,
)
from oncelog.protocol.records.codec import (
    NO_TIMESTAMP,
    Record,
    RecordColumns,
    SimpleRecord,
    decode_batch,
    decode_columns,
    encode_batch,
    iter_batch_columns,
    iter_batches,
    iter_records,
    records_section,
)
from oncelog.protocol.records.compression import (
    DEFAULT_MAX_DECOMPRESSED_SIZE,
    Compression,
    DecompressionError,
    compress,
    decompress,
)
from oncelog.protocol.records.control import (
    ControlType,
    control_record_type,
    decode_control_record,
    encode_control_batch,
)

__all__ = [
    "BATCH_HEADER_SIZE",
    "DEFAULT_MAX_DECOMPRESSED_SIZE",
    "NO_TIMESTAMP",
    "BatchHeader",
    "Compression",
    "ControlType",
    "DecompressionError",
    "InvalidBatchError",
    "Record",
    "RecordColumns",
    "SimpleRecord",
    "compress",
    "control_record_type",
    "decode_batch",
    "decode_columns",
    "decode_control_record",
    "decompress",
    "encode_batch",
    "encode_control_batch",
    "iter_batch_columns",
    "iter_batches",
    "iter_headers",
    "iter_records",
    "parse_header",
    "records_section",
    "validate_batch",
]
