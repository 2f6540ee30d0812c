"""Producer configuration: Kafka's property names and defaults, checked once in the constructor."""

from __future__ import annotations

from dataclasses import dataclass

from oncelog.client.errors import ConfigError
from oncelog.protocol.records import Compression

LINGER_MS = 5  # linger.ms, Kafka default 5 (since 4.0)
BATCH_SIZE = 16384  # batch.size, Kafka default 16384
TRANSACTION_TIMEOUT_MS = 60000  # transaction.timeout.ms, Kafka default 60000
RETRIES = 2147483647  # retries, Kafka default Integer.MAX_VALUE
MAX_IN_FLIGHT = 5  # max.in.flight.requests.per.connection, Kafka default 5
MAX_IN_FLIGHT_IDEMPOTENT = 5  # the most Kafka allows with enable.idempotence=true
REQUEST_TIMEOUT_MS = 30000  # request.timeout.ms, Kafka default 30000
DELIVERY_TIMEOUT_MS = 120000  # delivery.timeout.ms, Kafka default 120000
MAX_BLOCK_MS = 60000  # max.block.ms, Kafka default 60000
MAX_REQUEST_SIZE = 1048576  # max.request.size, Kafka default 1048576 (the largest record the producer sends)
RETRY_BACKOFF_MS = 100  # retry.backoff.ms, Kafka default 100

COMPRESSION_TYPES = {
    None: Compression.NONE,
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "snappy": Compression.SNAPPY,
    "lz4": Compression.LZ4,
    "zstd": Compression.ZSTD,
}
_ACKS = {"all": -1, "-1": -1, -1: -1, "1": 1, 1: 1, "0": 0, 0: 0}


@dataclass(frozen=True)
class ProducerConfig:
    """Validated producer settings (``acks`` normalised to -1/0/1, compression to a codec id)."""

    transactional_id: str | None
    enable_idempotence: bool
    acks: int
    linger_ms: int
    batch_size: int
    compression: Compression
    transaction_timeout_ms: int
    retries: int
    max_in_flight: int
    request_timeout_ms: int
    delivery_timeout_ms: int
    max_block_ms: int
    retry_backoff_ms: int
    client_id: str
    max_request_size: int = MAX_REQUEST_SIZE

    @classmethod
    def build(
        cls,
        *,
        transactional_id: str | None = None,
        enable_idempotence: bool = True,
        acks: str | int = "all",
        linger_ms: int = LINGER_MS,
        batch_size: int = BATCH_SIZE,
        compression_type: str | None = None,
        transaction_timeout_ms: int = TRANSACTION_TIMEOUT_MS,
        retries: int = RETRIES,
        max_in_flight_requests_per_connection: int = MAX_IN_FLIGHT,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS,
        delivery_timeout_ms: int = DELIVERY_TIMEOUT_MS,
        max_block_ms: int = MAX_BLOCK_MS,
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
        client_id: str = "oncelog-producer",
        max_request_size: int = MAX_REQUEST_SIZE,
    ) -> ProducerConfig:
        """Validate and normalise; raises ConfigError naming the offending property."""
        if acks not in _ACKS:
            raise ConfigError(f"acks must be one of all, -1, 0, 1; got {acks!r}")
        acks_n = _ACKS[acks]
        if compression_type not in COMPRESSION_TYPES:
            raise ConfigError(
                f"compression.type must be one of none, gzip, snappy, lz4, zstd; got {compression_type!r}"
            )
        if transactional_id is not None and not transactional_id:
            raise ConfigError("transactional.id must not be empty")
        if transactional_id is not None and not enable_idempotence:
            raise ConfigError("transactional.id requires enable.idempotence=true")
        if enable_idempotence:
            if retries == 0:
                raise ConfigError("enable.idempotence=true requires retries > 0")
            if acks_n != -1:
                raise ConfigError("enable.idempotence=true requires acks=all")
            if max_in_flight_requests_per_connection > MAX_IN_FLIGHT_IDEMPOTENT:
                raise ConfigError(
                    "enable.idempotence=true requires max.in.flight.requests.per.connection <= 5; "
                    f"got {max_in_flight_requests_per_connection}"
                )
        if max_in_flight_requests_per_connection < 1:
            raise ConfigError("max.in.flight.requests.per.connection must be at least 1")
        if retries < 0:
            raise ConfigError("retries must be >= 0")
        if linger_ms < 0:
            raise ConfigError("linger.ms must be >= 0")
        if batch_size <= 0:
            raise ConfigError("batch.size must be > 0")
        if transaction_timeout_ms <= 0:
            raise ConfigError("transaction.timeout.ms must be > 0")
        if max_request_size <= 0:
            raise ConfigError("max.request.size must be > 0")
        if delivery_timeout_ms < linger_ms + request_timeout_ms:
            raise ConfigError("delivery.timeout.ms must be >= linger.ms + request.timeout.ms")
        return cls(
            transactional_id,
            enable_idempotence,
            acks_n,
            linger_ms,
            batch_size,
            COMPRESSION_TYPES[compression_type],
            transaction_timeout_ms,
            retries,
            max_in_flight_requests_per_connection,
            request_timeout_ms,
            delivery_timeout_ms,
            max_block_ms,
            retry_backoff_ms,
            client_id,
            max_request_size,
        )
