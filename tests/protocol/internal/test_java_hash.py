"""Java String.hashCode and Kafka's coordinator partition choice; expected values were computed with a JVM."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from oncelog.protocol.internal.java_hash import java_abs, java_string_hash, partition_for_key

# (string, String.hashCode(), Utils.abs(hashCode) % 50) as printed by Java 17.
JAVA = [
    ("", 0, 0),
    ("hello", 99162322, 22),
    ("polygenelubricants", -(2**31), 0),  # hashCode == Integer.MIN_VALUE; Utils.abs gives 0
    ("\U0001f600", 1772899, 49),  # one non-BMP character = two UTF-16 code units D83D DE00
    ("x\U0001f600y", 58534910, 10),
    ("transaction-coordinator-ü", 482155760, 10),
    ("order-service-tx-42", 846412048, 48),
    ("日本語のID", -841592558, 8),  # negative: abs gives 8 where n & 0x7fffffff would give 40
    ("a\ud800b", 1807491, 41),  # a lone surrogate hashes as its code unit
]


@pytest.mark.parametrize(("s", "hash_code", "partition"), JAVA)
def test_matches_java(s: str, hash_code: int, partition: int) -> None:
    assert java_string_hash(s) == hash_code
    assert partition_for_key(s, 50) == partition


def test_collisions_like_java() -> None:
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112


def test_utils_abs_is_not_a_mask() -> None:
    assert java_abs(-(2**31)) == 0
    assert java_abs(-5) == 5
    assert (java_string_hash("日本語のID") & 0x7FFFFFFF) % 50 == 40  # what the wrong formula would give


def test_partition_count_must_be_positive() -> None:
    with pytest.raises(ValueError):
        partition_for_key("x", 0)


def _reference_hash(s: str) -> int:
    """Independent formulation: sum of c * 31**(n-1-i) over UTF-16 code units, as a signed int32."""
    units = []
    for ch in s:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    n = len(units)
    total = sum(c * 31 ** (n - 1 - i) for i, c in enumerate(units)) % 2**32
    return total - 2**32 if total >= 2**31 else total


@given(st.text(max_size=40), st.integers(1, 1000))
def test_properties(s: str, partitions: int) -> None:
    hc = java_string_hash(s)
    assert hc == _reference_hash(s)
    assert 0 <= partition_for_key(s, partitions) < partitions
