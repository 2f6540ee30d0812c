"""Kafka's default partitioner for a whole Arrow column of keys at once: murmur2 (Java ``Utils.murmur2``) computed
with numpy over every key together, block by block, instead of one Python call per key.

Guarantees: :func:`murmur2_many` gives, for every key, the value ``client.partitioner.murmur2`` gives, and
:func:`partitions_for_keys` the partition ``client.partitioner.partition_for_key`` chooses (the Java client's and
librdkafka's murmur2_random choice); keys must be non-null (a null key is the sticky partitioner's business).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

_M = np.uint32(0x5BD1E995)
_SEED = np.uint32(0x9747B28C)


def murmur2_many(keys: pa.Array) -> np.ndarray:
    """murmur2 of every key of a binary (or string) array without nulls, as uint32."""
    if pa.types.is_large_binary(keys.type) or pa.types.is_string(keys.type) or pa.types.is_large_string(keys.type):
        keys = keys.cast(pa.binary())
    if keys.null_count:
        raise ValueError("murmur2_many needs keys without nulls")
    n = len(keys)
    _, offsets_buf, data_buf = keys.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[keys.offset : keys.offset + n + 1].astype(np.int64)
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    data = np.concatenate([data, np.zeros(4, np.uint8)]).astype(np.uint32)  # reads of a last partial block stay in
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    h = _SEED ^ lengths.astype(np.uint32)
    blocks = lengths // 4
    for b in range(int(blocks.max()) if n else 0):
        idx = np.flatnonzero(blocks > b)
        pos = starts[idx] + 4 * b
        k = data[pos] | (data[pos + 1] << 8) | (data[pos + 2] << 16) | (data[pos + 3] << 24)
        k *= _M
        k ^= k >> 24
        k *= _M
        h[idx] = (h[idx] * _M) ^ k
    tail = starts + blocks * 4
    extra = lengths % 4
    three = extra == 3
    h[three] ^= data[tail[three] + 2] << 16
    two = extra >= 2
    h[two] ^= data[tail[two] + 1] << 8
    one = extra >= 1
    h[one] ^= data[tail[one]]
    h[one] *= _M
    h ^= h >> 13
    h *= _M
    h ^= h >> 15
    return h


def partitions_for_keys(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """The partition (int64) Kafka's default partitioner chooses for every non-null key of ``keys``."""
    return ((murmur2_many(keys) & np.uint32(0x7FFFFFFF)) % np.uint32(num_partitions)).astype(np.int64)
