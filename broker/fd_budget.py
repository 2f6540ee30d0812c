"""The process's file-descriptor budget: how many new partition logs it can still open, whether it can open the logs
on disk at start, and the soft ``RLIMIT_NOFILE`` raised to the hard limit at start (as servers commonly do; Kafka's
packaging asks for a high ``ulimit -n`` instead).

What is counted is what storage keeps open: every segment of every log holds ``OPEN_FILES_PER_SEGMENT`` descriptors
(``.log``, ``.index``, ``.timeindex``, ``.txnindex``; storage.segment declares it, so the two cannot drift), for as
long as the log is open, the active segment and all older ones alike. Everything else (connections, the fsync
helper's socket, the compaction child's pipe) is counted by reading ``/proc/self/fd``.

Guarantees:
- A creation is approved only when, after it and the creations under way, every new partition can open its first
  segment and roll once (the roll opens a second segment while the first stays open: ``SEGMENTS_PER_NEW_PARTITION``)
  and ``RESERVED_FDS`` descriptors are left for connections and the rolls of existing logs. So an approved creation
  finishes (Kafka checks nothing here; an IOException while creating a log takes its whole log directory offline,
  LogManager's getOrCreateLog). Segments added later by rolls each take ``OPEN_FILES_PER_SEGMENT`` more from the
  budget, as in Kafka, whose docs size the limit by partitions x segments per partition.
- At start, before any log is opened, the logs on disk are counted; a process that cannot open them all and keep
  ``MIN_SERVING_FDS`` free stops with one line (``DescriptorLimitError``) saying how many descriptors it needs and
  which limit to raise, and so does an EMFILE that happens while loading anyway.
Memory is no reason for a bound: an idle partition costs about 3.3 KiB (README, P9).
"""

from __future__ import annotations

import os
import resource

from oncelog.storage.segment import OPEN_FILES_PER_SEGMENT

#: Segments a new partition log is budgeted for: its first, and the one its first roll opens beside it.
SEGMENTS_PER_NEW_PARTITION = 2
#: Descriptors a new partition log is budgeted for.
FDS_PER_NEW_PARTITION = OPEN_FILES_PER_SEGMENT * SEGMENTS_PER_NEW_PARTITION
#: Descriptors kept free after a creation, for connections and the rolls of existing logs.
RESERVED_FDS = 1024
#: Descriptors a broker needs beyond its logs to serve at all (listener sockets, the fsync helper, a few
#: connections): a start that would leave fewer stops instead.
MIN_SERVING_FDS = 64
#: The limit assumed when RLIMIT_NOFILE is unlimited (Linux never allows that for it: fs.nr_open, 2**20 by default,
#: caps it), so that a request for 2**31 - 1 partitions is refused everywhere.
UNLIMITED_FDS = 2**20
_FD_DIR = "/proc/self/fd"


class DescriptorLimitError(Exception):
    """The process cannot open the logs it must open; the message is one line naming the limit to raise."""


def open_descriptors() -> int | None:
    """How many descriptors the process has open (None where ``/proc/self/fd`` does not exist)."""
    try:
        return len(os.listdir(_FD_DIR))
    except OSError:
        return None


def _finite(limit: int) -> int:
    return UNLIMITED_FDS if limit == resource.RLIM_INFINITY else limit


def descriptor_limits() -> tuple[int, int]:
    """(soft, hard) RLIMIT_NOFILE, unlimited counted as ``UNLIMITED_FDS``."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _finite(soft), _finite(hard)


def raise_soft_limit() -> tuple[int, int] | None:
    """Raise the soft RLIMIT_NOFILE to the hard one; returns (old soft, new soft) when it changed, else None."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return None
    target = hard
    if hard == resource.RLIM_INFINITY:
        try:
            with open("/proc/sys/fs/nr_open") as nr_open:  # the kernel's ceiling for RLIMIT_NOFILE
                target = int(nr_open.read())
        except (OSError, ValueError):
            target = UNLIMITED_FDS
    if soft != resource.RLIM_INFINITY and target <= soft:
        return None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (OSError, ValueError):
        return None
    return _finite(soft), target


def partitions_affordable(pending_partitions: int = 0) -> int:
    """How many more partition logs may be created now, after ``pending_partitions`` already being created.
    Without ``/proc`` the descriptors already open are not counted."""
    soft, _hard = descriptor_limits()
    in_use = open_descriptors() or 0
    spare = soft - in_use - RESERVED_FDS - pending_partitions * FDS_PER_NEW_PARTITION
    return max(spare // FDS_PER_NEW_PARTITION, 0)


def limit_advice(needed: int) -> str:
    """The end of a one-line message: which limit to raise, and to what."""
    soft, hard = descriptor_limits()
    which = "the soft and hard RLIMIT_NOFILE" if needed > hard else "the soft RLIMIT_NOFILE"
    return (
        f"RLIMIT_NOFILE is {soft} (hard {hard}); raise {which} to at least {needed} "
        f"(ulimit -n {needed}, or LimitNOFILE={needed} in a systemd unit)"
    )


def startup_problem(segments: int, partitions: int) -> str | None:
    """The one-line reason this process cannot open ``segments`` segments of ``partitions`` partition logs (its
    descriptors open now included), or None when it can."""
    soft, _hard = descriptor_limits()
    in_use = open_descriptors() or 0
    needed_now = in_use + segments * OPEN_FILES_PER_SEGMENT
    if needed_now + MIN_SERVING_FDS <= soft:
        return None
    return startup_message(segments, partitions, needed_now + RESERVED_FDS)


def startup_message(segments: int, partitions: int, needed: int) -> str:
    return (
        f"oncelog: not enough file descriptors to open the logs: {partitions} partition(s) with {segments} "
        f"segment(s) keep {OPEN_FILES_PER_SEGMENT} descriptors open per segment; {limit_advice(needed)}"
    )
