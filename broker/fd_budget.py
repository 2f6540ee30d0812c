"""How many new partition logs this process still has file descriptors for: the bound on topic creation.

A partition log keeps three descriptors open per segment (``.log``, ``.index``, ``.timeindex``), so a new one takes
three; the soft ``RLIMIT_NOFILE`` bounds them together with every connection, the fsync helper's socket and the
segments later rolls open. Running out mid-way would fail appends, rolls and accepts all over the broker (Kafka
checks nothing here; an IOException while creating a log takes its whole log directory offline, LogManager's
getOrCreateLog). So a creation that would leave fewer than ``RESERVED_FDS`` descriptors is refused up front.
Memory is no reason for a bound: an idle partition costs about 3.3 KiB (README, P9).
"""

from __future__ import annotations

import os
import resource

#: Descriptors a new partition log opens: its first segment's .log, .index and .timeindex.
FDS_PER_NEW_PARTITION = 3
#: Descriptors kept free after a creation, for connections and segment rolls.
RESERVED_FDS = 1024
#: The limit assumed when RLIMIT_NOFILE is unlimited (Linux never allows that for it: fs.nr_open, 2**20 by default,
#: caps it), so that a request for 2**31 - 1 partitions is refused everywhere.
UNLIMITED_FDS = 2**20
_FD_DIR = "/proc/self/fd"


def open_descriptors() -> int | None:
    """How many descriptors the process has open (None where ``/proc/self/fd`` does not exist)."""
    try:
        return len(os.listdir(_FD_DIR))
    except OSError:
        return None


def partitions_affordable(pending_partitions: int = 0) -> int:
    """How many more partition logs may be created now, after ``pending_partitions`` already being created.
    Without ``/proc`` the descriptors already open are not counted."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = UNLIMITED_FDS
    in_use = open_descriptors() or 0
    spare = soft - in_use - RESERVED_FDS - pending_partitions * FDS_PER_NEW_PARTITION
    return max(spare // FDS_PER_NEW_PARTITION, 0)
