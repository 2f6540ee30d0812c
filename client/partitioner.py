"""Kafka's default partitioner: murmur2 of the key bytes (Java ``Utils.murmur2``), positive, modulo partitions.

Keyed records land where the Java client and librdkafka's ``murmur2_random`` put them; keyless records stick to
one partition per topic until the batch being filled for it is sent (KIP-480's sticky partitioning).
"""

from __future__ import annotations

import random

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 of ``data`` as an unsigned int (Java returns the same bits as a signed int)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - length % 4
    for i in range(0, whole, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = ((h * _M) & _MASK) ^ k
    extra = length % 4
    if extra == 3:
        h ^= data[whole + 2] << 16
    if extra >= 2:
        h ^= data[whole + 1] << 8
    if extra >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def partition_for_key(key: bytes, num_partitions: int) -> int:
    """The partition Kafka's default partitioner chooses for a non-null ``key``."""
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


class DefaultPartitioner:
    """murmur2 for keyed records; sticky per topic for keyless ones (changed by :meth:`next_batch`)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self._sticky: dict[str, int] = {}
        self._rng = rng or random.Random()

    def __call__(self, topic: str, key: bytes | None, num_partitions: int) -> int:
        if key is not None:
            return partition_for_key(key, num_partitions)
        current = self._sticky.get(topic)
        if current is None or current >= num_partitions:
            current = self._rng.randrange(num_partitions)
            self._sticky[topic] = current
        return current

    def next_batch(self, topic: str, num_partitions: int, previous: int) -> None:
        """The sticky partition's batch filled up: move keyless records of ``topic`` to another partition."""
        if self._sticky.get(topic) != previous:
            return
        if num_partitions <= 1:
            self._sticky[topic] = 0
            return
        choice = self._rng.randrange(num_partitions - 1)
        self._sticky[topic] = choice if choice < previous else choice + 1
