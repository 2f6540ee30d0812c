"""oncelog.client: async Kafka client (anyio: runs under trio or asyncio) and a blocking facade (``.sync``)."""

from oncelog.client.admin import (
    Admin,
    GroupDescription,
    GroupListing,
    HangingTransaction,
    LogDirDescription,
    ProducerState,
    TransactionDescription,
    TransactionListing,
)
from oncelog.client.consumer import Consumer
from oncelog.client.errors import (
    AbortableTransactionError,
    BrokerResponseError,
    ConfigError,
    ErrorClass,
    FatalProducerError,
    IllegalStateError,
    KafkaConnectionError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    SaslAuthenticationError,
    TransactionAbortedError,
    UnsupportedVersionError,
    classify,
)
from oncelog.client.partitioner import DefaultPartitioner, murmur2, partition_for_key
from oncelog.client.producer import Producer
from oncelog.client.txn_manager import TxnState
from oncelog.client.types import ConsumerRecord, GroupMetadata, OffsetAndMetadata, RecordMetadata, TopicPartition

__all__ = [
    "AbortableTransactionError",
    "Admin",
    "BrokerResponseError",
    "ConfigError",
    "Consumer",
    "ConsumerRecord",
    "DefaultPartitioner",
    "ErrorClass",
    "FatalProducerError",
    "GroupDescription",
    "GroupListing",
    "GroupMetadata",
    "HangingTransaction",
    "IllegalStateError",
    "KafkaConnectionError",
    "KafkaError",
    "KafkaTimeoutError",
    "LogDirDescription",
    "OffsetAndMetadata",
    "Producer",
    "ProducerFencedError",
    "ProducerState",
    "RecordMetadata",
    "SaslAuthenticationError",
    "TopicPartition",
    "TransactionAbortedError",
    "TransactionDescription",
    "TransactionListing",
    "TxnState",
    "UnsupportedVersionError",
    "classify",
    "murmur2",
    "partition_for_key",
]
