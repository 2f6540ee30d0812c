"""Who is appending to a partition log (Kafka's AppendOrigin, without REPLICATION and RAFT_LEADER)."""

from __future__ import annotations

import enum


class AppendOrigin(enum.Enum):
    """CLIENT: a producer's Produce request (control batches refused, sequences checked, duplicates answered).

    COORDINATOR: the broker's own coordinators (transaction markers and ``__transaction_state`` /
    ``__consumer_offsets`` records): control batches allowed, only producer epochs are checked.
    """

    CLIENT = "client"
    COORDINATOR = "coordinator"
