"""The cyclic garbage collector's settings while the broker serves.

CPython frees almost everything the broker makes by reference counting; the cyclic collector only finds cycles
(exceptions with their tracebacks, mostly). With its defaults it runs a young collection every 700 net allocations
of container objects, and a full one once survivors grow by a quarter: a request that decodes into 90,000 objects
(a Metadata request naming 90,000 topics, within ``MAX_REQUEST_ELEMENTS``) sets off young collections that promote
them while they are in use, then full passes over every tracked object. Measured on the hostile soak
(``tests/torture/hostile_soak.py``, 1,000 connections): 3 to 5 full collections every 10 s taking 30-75 ms of CPU
each, every one holding the event loop (or, from the worker thread, the GIL) for that long.

``settle_collector`` first moves what exists once the broker serves (code, compiled codecs, the loaded logs), which
lives as long as the process, out of the collector's passes (``gc.freeze``), then raises the young generation's
threshold to ``YOUNG_COLLECTION_THRESHOLD``: such a request is decoded, answered and freed before a collection
comes, and cyclic garbage waits for at most that many net allocations. Measured on the same soak: one young
collection in 40 s (33 ms), no full one.
"""

from __future__ import annotations

import gc

#: Net allocations of container objects between two young collections (CPython's default: 700).
YOUNG_COLLECTION_THRESHOLD = 50_000
#: Young collections between two middle-generation ones, and those between two full ones (CPython's: 10 and 10).
MIDDLE_COLLECTION_THRESHOLD = 20
OLD_COLLECTION_THRESHOLD = 10


def settle_collector() -> None:
    """Freeze what exists now out of the collector's passes and set the thresholds above (process-wide)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, MIDDLE_COLLECTION_THRESHOLD, OLD_COLLECTION_THRESHOLD)
