"""Client exceptions and the one table that classifies Kafka error codes for the producer.

``classify(code)`` answers, as data, what a producer does with an error code: retry it (``RETRIABLE``), fail the
transaction so that it can only be aborted (``ABORTABLE``), or fail the producer for good (``FATAL``). Nothing else
in the client decides this.
"""

from __future__ import annotations

import enum

from oncelog.protocol import ErrorCode


class KafkaError(Exception):
    """Base of every client error. ``code`` is the Kafka error code, or None for client-side conditions."""

    code: ErrorCode | None = None

    def __init__(self, message: str = "", code: int | None = None) -> None:
        if code is not None:
            self.code = ErrorCode(code)
        if not message and self.code is not None:
            message = self.code.name
        super().__init__(message)

    @property
    def retriable(self) -> bool:
        return self.code is not None and classify(self.code) is ErrorClass.RETRIABLE


class ConfigError(KafkaError, ValueError):
    """An invalid or inconsistent configuration (raised by the constructor, before any I/O)."""


class BrokerResponseError(KafkaError):
    """The broker answered with ``code``."""


class KafkaConnectionError(KafkaError):
    """A broker could not be reached, or the connection broke with requests outstanding."""

    code = ErrorCode.NETWORK_EXCEPTION


class KafkaTimeoutError(KafkaError):
    """An operation did not complete in its time limit (delivery.timeout.ms, request.timeout.ms, ...)."""

    code = ErrorCode.REQUEST_TIMED_OUT


class UnsupportedVersionError(KafkaError):
    """The broker does not support a version of an API this client can speak."""

    code = ErrorCode.UNSUPPORTED_VERSION


class SaslAuthenticationError(KafkaError):
    """The broker refused the SASL credentials (or offered no usable mechanism); not retriable."""

    code = ErrorCode.SASL_AUTHENTICATION_FAILED


class IllegalStateError(KafkaError):
    """A method was called in a state where it is not allowed (e.g. send outside a transaction)."""


class ProducerFencedError(KafkaError):
    """Another producer with the same transactional.id took over; this producer can only be closed."""

    code = ErrorCode.PRODUCER_FENCED


class TransactionAbortedError(KafkaError):
    """The record was not written because its transaction was aborted."""


class FatalProducerError(KafkaError):
    """The producer hit a fatal error (state FATAL_ERROR); every further call raises this."""


class AbortableTransactionError(KafkaError):
    """The current transaction failed; call abort_transaction, then the producer can be used again."""


class ErrorClass(enum.Enum):
    NONE = "none"
    RETRIABLE = "retriable"
    ABORTABLE = "abortable"
    FATAL = "fatal"


# Fatal: the producer cannot continue (Kafka's TransactionManager treats these as fatal errors).
FATAL_CODES: frozenset[ErrorCode] = frozenset(
    {
        ErrorCode.PRODUCER_FENCED,
        ErrorCode.INVALID_PRODUCER_EPOCH,
        ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
        ErrorCode.UNSUPPORTED_VERSION,
        ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        ErrorCode.INVALID_PRODUCER_ID_MAPPING,
        ErrorCode.INVALID_TXN_STATE,
        ErrorCode.TRANSACTION_COORDINATOR_FENCED,
        ErrorCode.INVALID_TRANSACTION_TIMEOUT,
        ErrorCode.SECURITY_DISABLED,
        ErrorCode.SASL_AUTHENTICATION_FAILED,
    }
)

# Retriable for the producer: Kafka's retriable set plus what the transaction manager retries itself.
RETRIABLE_CODES: frozenset[ErrorCode] = frozenset(
    {code for code in ErrorCode if code.retriable}
    - {ErrorCode.CORRUPT_MESSAGE}  # a corrupt batch is rebuilt identically; retrying cannot help
)

# Abortable codes that additionally require the KIP-360 epoch bump before the producer's next transaction.
EPOCH_BUMP_CODES: frozenset[ErrorCode] = frozenset(
    {
        ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
        ErrorCode.UNKNOWN_PRODUCER_ID,
    }
)


def classify(code: int) -> ErrorClass:
    """What a producer does with ``code``: NONE, RETRIABLE, ABORTABLE (everything unlisted) or FATAL."""
    error = ErrorCode(code)
    if error is ErrorCode.NONE:
        return ErrorClass.NONE
    if error in FATAL_CODES:
        return ErrorClass.FATAL
    if error in RETRIABLE_CODES:
        return ErrorClass.RETRIABLE
    return ErrorClass.ABORTABLE


def error_for(code: int, message: str | None = None) -> KafkaError:
    """The exception to raise for a non-zero broker error code."""
    error = ErrorCode(code)
    text = f"{error.name}: {message}" if message else error.name
    if error is ErrorCode.PRODUCER_FENCED or error is ErrorCode.INVALID_PRODUCER_EPOCH:
        return ProducerFencedError(text, code)
    if error is ErrorCode.UNSUPPORTED_VERSION:
        return UnsupportedVersionError(text, code)
    if error in (
        ErrorCode.SASL_AUTHENTICATION_FAILED,
        ErrorCode.UNSUPPORTED_SASL_MECHANISM,
        ErrorCode.ILLEGAL_SASL_STATE,
    ):
        return SaslAuthenticationError(text, code)
    return BrokerResponseError(text, code)
