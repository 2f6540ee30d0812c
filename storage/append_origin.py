"""Who is appending to a partition log (Kafka's AppendOrigin, without RAFT_LEADER)."""

from __future__ import annotations

import enum


class AppendOrigin(enum.Enum):
    """CLIENT: a producer's Produce request (control batches refused, sequences checked, duplicates answered).

    COORDINATOR: the broker's own coordinators (transaction markers and ``__transaction_state`` /
    ``__consumer_offsets`` records): control batches allowed, only producer epochs are checked.

    REPLICATION: a follower copying its leader's batches (``PartitionLog.append_as_follower``): the leader checked
    them, so producer state is updated from them without sequence, producer-epoch or coordinator-epoch checks.
    """

    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"
