"""Hypothesis strategies for record batches, shared by the codec tests and the client's decoder tests."""

from __future__ import annotations

from hypothesis import strategies as st
from oncelog.protocol.records import SimpleRecord


def simple_records(*, max_bytes: int, max_records: int) -> st.SearchStrategy[list[SimpleRecord]]:
    """Lists of 1..``max_records`` SimpleRecords: null or binary keys and values of up to ``max_bytes``, up to 3
    headers (text keys, null or binary values), timestamps up to 2^41 ms."""
    opt_bytes = st.none() | st.binary(max_size=max_bytes)
    return st.lists(
        st.builds(
            SimpleRecord,
            opt_bytes,
            opt_bytes,
            st.lists(st.tuples(st.text(max_size=8), opt_bytes), max_size=3),
            st.integers(0, 2**41),
        ),
        min_size=1,
        max_size=max_records,
    )
