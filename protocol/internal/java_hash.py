"""Java's ``String.hashCode`` and Kafka's coordinator partition choice built on it.

Kafka places a transactional id (or group id) on partition ``Utils.abs(id.hashCode()) % partitionCount`` of
``__transaction_state`` (``__consumer_offsets``); matching it keeps our placement identical to Kafka's.
"""

from __future__ import annotations

import functools

_MASK32 = 0xFFFFFFFF
_INT32_MIN = -(2**31)


@functools.lru_cache(maxsize=4096)  # a few hot ids (transactional and group ids) are hashed on every request
def java_string_hash(s: str) -> int:
    """``s.hashCode()`` as Java computes it: ``h = 31*h + c`` over UTF-16 code units, wrapped to a signed int32.

    Characters outside the BMP count as their two surrogate code units. Lone surrogates in ``s`` are hashed
    as the single code unit they are, as Java would.
    """
    h = 0
    units = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(units), 2):
        h = (31 * h + ((units[i] << 8) | units[i + 1])) & _MASK32
    return h - 0x1_0000_0000 if h & 0x8000_0000 else h


def partition_for_key(key: str, partitions: int) -> int:
    """Kafka's ``Utils.abs(key.hashCode()) % partitions``, always in ``range(partitions)``.

    ``Utils.abs`` is ``Math.abs`` except that Integer.MIN_VALUE maps to 0 -- it is NOT the ``n & 0x7fffffff`` of
    ``Utils.toPositive`` (the producer's partitioner); the two differ for every other negative hash.
    Raises ValueError unless ``partitions`` is positive.
    """
    if partitions <= 0:
        raise ValueError(f"partition count must be positive, got {partitions}")
    return java_abs(java_string_hash(key)) % partitions


def java_abs(n: int) -> int:
    """Kafka's ``Utils.abs`` on an int32: ``abs(n)``, but 0 for Integer.MIN_VALUE (which Math.abs leaves negative)."""
    return 0 if n == _INT32_MIN else abs(n)
