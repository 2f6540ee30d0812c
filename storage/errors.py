"""Storage exceptions; the broker maps each to one Kafka error code (named in the class docstring)."""

from __future__ import annotations


class StorageError(Exception):
    """Base class of every error raised by ``oncelog.storage``."""


class CorruptRecordError(StorageError):
    """A batch failed its CRC check. Kafka: CORRUPT_MESSAGE (2)."""


class InvalidRecordError(StorageError):
    """Malformed batch: bad magic, bad lengths, truncated tail, no batches. Reported as CORRUPT_MESSAGE (2), the
    code Kafka gives batches it cannot frame."""


class RecordValidationError(InvalidRecordError):
    """A batch or its records break a rule of the log (``storage.log_validator``): a client's control batch, a
    record count that disagrees with the last offset delta or the records, a malformed record, a keyless record in
    a compacted log. Kafka: INVALID_RECORD (87).

    ``record_errors`` lists ``(index in its batch, message)`` of every offending record when records are to blame
    (Kafka's ProduceResponse ``record_errors``, v8+, KIP-467); empty when the batch as a whole is.
    """

    def __init__(self, message: str, record_errors: list[tuple[int, str]] | None = None) -> None:
        super().__init__(message)
        self.record_errors = record_errors or []


class InvalidTimestampError(RecordValidationError):
    """A record's timestamp is outside message.timestamp.before/after.max.ms, or a client sent a LogAppendTime
    batch. Kafka: INVALID_TIMESTAMP (32), with ``record_errors``."""


class RecordTooLargeError(StorageError):
    """A batch is larger than ``message.max.bytes``. Kafka: MESSAGE_TOO_LARGE (10)."""


class OffsetOutOfRangeError(StorageError):
    """A read below the log start offset or beyond the log end offset. Kafka: OFFSET_OUT_OF_RANGE (1)."""


class OutOfOrderSequenceError(StorageError):
    """An idempotent batch does not follow the producer's last sequence.

    Kafka: OUT_OF_ORDER_SEQUENCE_NUMBER (45).
    """


class InvalidProducerEpochError(StorageError):
    """The batch's producer epoch is older than the one seen last. Kafka: INVALID_PRODUCER_EPOCH (47)."""


class UnknownProducerIdError(StorageError):
    """Kafka: UNKNOWN_PRODUCER_ID (59).

    Not raised by this package: since KIP-360 (Kafka 2.5+, still so in 3.9) a producer id without state is
    accepted at any sequence. Kept so the broker's error mapping stays complete.
    """


class InvalidTxnStateError(StorageError):
    """A non-transactional batch from a producer with an open transaction. Kafka: INVALID_TXN_STATE (48)."""


class KafkaStorageError(StorageError):
    """An OSError while writing or syncing (e.g. ENOSPC). Kafka: KAFKA_STORAGE_ERROR (56)."""


class TransactionCoordinatorFencedError(StorageError):
    """A transaction marker carries an older coordinator epoch than one already seen for its producer.

    Kafka: TRANSACTION_COORDINATOR_FENCED (52).
    """


class UnexpectedAppendOffsetError(StorageError):
    """A follower's append holds a batch below the log end offset, or batches whose offsets do not increase
    (Kafka's UnexpectedAppendOffsetException / OffsetsOutOfOrderException). Raised to the follower's fetcher only,
    never answered to a client (KAFKA_STORAGE_ERROR if it ever were)."""
