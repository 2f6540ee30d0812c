"""Fixed glibc malloc thresholds for the broker's large, short-lived buffers.

A Produce request of 1 MB lives in a few buffers of its size for one request. glibc serves such sizes from fresh
``mmap`` pages above its mmap threshold, and moves that threshold and the heap's trim threshold as chunks are freed,
so whether a 1 MB buffer costs 256 page faults and the kernel's zeroing, or reuses warm heap pages, depends on the
process's allocation history. Measured in P2 (page-cache mode, 512 MiB in 1 MB batches), nine alternating runs each:
left alone, six runs took 0.9-1.2 s of broker CPU (394-613 MB/s) and three 0.4 s (1,162-1,259 MB/s); with the
thresholds fixed, eight of nine took 0.40-0.47 s (1,087-1,266 MB/s).

Fixing the thresholds (which also stops glibc moving them) keeps buffers up to ``MMAP_THRESHOLD_BYTES`` on the heap,
and lets up to ``TRIM_THRESHOLD_BYTES`` of freed heap stay mapped for the next request.
"""

from __future__ import annotations

import ctypes
import os

import structlog

log = structlog.get_logger(__name__)

#: Allocations below this come from the heap (glibc's own ceiling for the dynamic threshold is 32 MiB on 64-bit).
MMAP_THRESHOLD_BYTES = 8 * 1024 * 1024
#: Free memory at the heap's top kept mapped rather than returned to the kernel.
TRIM_THRESHOLD_BYTES = 64 * 1024 * 1024

# mallopt parameters from glibc's <malloc.h>.
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def fix_malloc_thresholds() -> bool:
    """Set glibc's mmap and trim thresholds to the constants above; True if set. Elsewhere (musl, macOS) a no-op
    that returns False. The environment (``MALLOC_MMAP_THRESHOLD_`` and ``MALLOC_TRIM_THRESHOLD_``) wins when set,
    so an operator can still choose other values."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or "MALLOC_TRIM_THRESHOLD_" in os.environ or not _is_glibc():
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1 and mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) == 1
    if not ok:
        log.warning("mallopt_refused", mmap_threshold=MMAP_THRESHOLD_BYTES, trim_threshold=TRIM_THRESHOLD_BYTES)
    return ok


def _is_glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (ValueError, OSError):
        return False
