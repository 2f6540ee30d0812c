"""Records of the ``__transaction_state`` topic: key and value, byte-compatible with Kafka's coordinator.

Both are "version-prefixed": an int16 version, then the struct of that version.

* Key (TransactionLogKey, only v0): ``transactional_id`` as a classic string (int16 length).
* Value (TransactionLogValue, v0 classic; v1 flexible): producer_id int64, producer_epoch int16,
  transaction_timeout_ms int32, transaction_status int8, transaction_partitions nullable array of
  (topic string, partition_ids [int32]), transaction_last_update_timestamp_ms int64,
  transaction_start_timestamp_ms int64. v1 uses compact encodings and ends with a tagged-field section holding
  previous_producer_id (tag 0, default -1), next_producer_id (tag 1, default -1) and client_transaction_version
  (tag 2, default 0) -- KIP-890's fields; v0 has no place for them.

Kafka writes value v0 unless ``transaction.version`` >= 1 is finalized, so v0 is our default. A null value is a
tombstone (the transactional id expired). The coordinator's ``lastProducerEpoch`` is never persisted: Kafka
keeps it in memory only and resets it to -1 (NO_PRODUCER_EPOCH) when it reloads the log.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from oncelog.protocol.errors import DecodeError, EncodeError
from oncelog.protocol.internal.versioned import build, parse, split_version
from oncelog.protocol.schema import F, Message

TRANSACTION_STATE_TOPIC = "__transaction_state"

KEY_VERSION = 0
VALUE_VERSIONS = (0, 1)
DEFAULT_VALUE_VERSION = 0  # what Kafka writes while transaction.version < 1 (its default through 3.x)


class TxnState(IntEnum):
    """Kafka's TransactionState, with the ids it stores in ``transaction_status``; ``.kafka_name`` is its display
    name. The one transaction-state enum: the coordinator's TransactionMetadata holds it too."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The state name Kafka reports in DescribeTransactions / ListTransactions, e.g. ``"PrepareCommit"``."""
        return "".join(part.capitalize() for part in self.name.split("_"))

    @classmethod
    def from_kafka_name(cls, name: str) -> TxnState | None:
        """The state called ``name`` (exact, case-sensitive as in Kafka), or None if there is none."""
        return _BY_NAME.get(name)


_BY_NAME = {s.kafka_name: s for s in TxnState}

_KEY = Message("TransactionLogKey", -1, "0", "none", (F("transactional_id", "string", "0"),))

_VALUE = Message(
    "TransactionLogValue",
    -1,
    "0-1",
    "1+",
    (
        F("producer_id", "int64"),
        F("previous_producer_id", "int64", "1+", tag=0, tagged="1+", default=-1),
        F("next_producer_id", "int64", "1+", tag=1, tagged="1+", default=-1),
        F("producer_epoch", "int16"),
        F("transaction_timeout_ms", "int32"),
        F("transaction_status", "int8"),
        F("transaction_partitions", "[]", "0+", F("topic", "string"), F("partition_ids", "[]int32"), nullable="0+"),
        F("transaction_last_update_timestamp_ms", "int64"),
        F("transaction_start_timestamp_ms", "int64"),
        F("client_transaction_version", "int16", "1+", tag=2, tagged="1+", default=0),
    ),
)


@dataclass(frozen=True)
class TxnLogValue:
    """One transactional id's persisted coordinator state.

    ``partitions`` maps topic -> partition ids in the transaction (empty in state Empty: Kafka writes null
    then). ``previous_producer_id``, ``next_producer_id`` and ``client_transaction_version`` exist only in value
    v1 (KIP-890); encoding v0 drops them and decoding v0 gives their defaults (-1, -1, 0).
    """

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    state: TxnState
    partitions: dict[str, list[int]]
    last_update_timestamp_ms: int
    start_timestamp_ms: int
    previous_producer_id: int = -1
    next_producer_id: int = -1
    client_transaction_version: int = 0


@functools.lru_cache(maxsize=4096)  # every state change of an id writes the same key
def encode_txn_log_key(transactional_id: str) -> bytes:
    """The record key: int16 version 0 + ``transactional_id``. Raises EncodeError if it cannot be encoded."""
    return build(_KEY, KEY_VERSION, {"transactional_id": transactional_id})


def decode_txn_log_key(data: bytes | bytearray | memoryview) -> str:
    """The transactional id of a record key. Raises DecodeError for a version other than 0, truncation,
    invalid UTF-8 or trailing bytes."""
    version, body = split_version(data, "__transaction_state key")
    if version != KEY_VERSION:
        raise DecodeError(f"unknown __transaction_state key version {version}")
    return parse(_KEY, version, body).transactional_id


def encode_txn_log_value(value: TxnLogValue, *, version: int = DEFAULT_VALUE_VERSION) -> bytes:
    """The record value at ``version`` (0 by default, as Kafka 3.x writes it; 1 is the flexible form).

    Partitions are written grouped by topic in ``value.partitions`` order; state Empty writes a null partition
    array. Raises EncodeError for an unknown version, an Empty state that still lists partitions (Kafka refuses
    that too), a state code outside TxnState, or values out of range for their wire types.
    """
    if version not in VALUE_VERSIONS:
        raise EncodeError(f"unknown __transaction_state value version {version}")
    try:
        state = TxnState(value.state)
    except ValueError:
        raise EncodeError(f"unknown transaction state code {value.state}") from None
    if state is TxnState.EMPTY:
        if any(value.partitions.values()):
            raise EncodeError(f"a transaction in state Empty cannot have partitions: {value.partitions}")
        partitions: list[dict[str, Any]] | None = None
    else:
        partitions = [{"topic": t, "partition_ids": list(ids)} for t, ids in value.partitions.items()]
    body = {
        "producer_id": value.producer_id,
        "previous_producer_id": value.previous_producer_id,
        "next_producer_id": value.next_producer_id,
        "producer_epoch": value.producer_epoch,
        "transaction_timeout_ms": value.transaction_timeout_ms,
        "transaction_status": int(state),
        "transaction_partitions": partitions,
        "transaction_last_update_timestamp_ms": value.last_update_timestamp_ms,
        "transaction_start_timestamp_ms": value.start_timestamp_ms,
        "client_transaction_version": value.client_transaction_version,
    }
    return build(_VALUE, version, body)


def decode_txn_log_value(data: bytes | bytearray | memoryview | None) -> TxnLogValue | None:
    """The value of a record; None for a tombstone (``data is None``). Accepts versions 0 and 1.

    ``state`` is a TxnState. As Kafka does, the partition list is ignored in state Empty; repeated topics
    are merged and repeated partition ids dropped (Kafka keeps a set). Raises DecodeError for another version,
    an unknown state code, truncation, bad encodings or trailing bytes.
    """
    if data is None:
        return None
    version, body = split_version(data, "__transaction_state value")
    if version not in VALUE_VERSIONS:
        raise DecodeError(f"unknown __transaction_state value version {version}")
    v = parse(_VALUE, version, body)
    try:
        state = TxnState(v.transaction_status)
    except ValueError:
        raise DecodeError(f"unknown transaction state code {v.transaction_status}") from None
    partitions: dict[str, list[int]] = {}
    if state is not TxnState.EMPTY and v.transaction_partitions is not None:
        for entry in v.transaction_partitions:
            ids = partitions.setdefault(entry.topic, [])
            ids.extend(i for i in entry.partition_ids if i not in ids)
    return TxnLogValue(
        producer_id=v.producer_id,
        producer_epoch=v.producer_epoch,
        transaction_timeout_ms=v.transaction_timeout_ms,
        state=state,
        partitions=partitions,
        last_update_timestamp_ms=v.transaction_last_update_timestamp_ms,
        start_timestamp_ms=v.transaction_start_timestamp_ms,
        previous_producer_id=v.previous_producer_id,
        next_producer_id=v.next_producer_id,
        client_transaction_version=v.client_transaction_version,
    )
