"""KIP-848's server-side assignors, ``uniform`` and ``range``: a group's target assignment from its members'
subscriptions and current assignments.

Guarantees (both assignors): every partition of every topic some member subscribes to goes to exactly one member
subscribed to its topic; no member gets a partition of a topic it does not subscribe to; the result depends only on
the inputs (members ordered by id), never on dict order.
- ``uniform`` (Kafka's UniformAssignor): members' partition counts differ by at most one among members that could
  take each other's partitions (with identical subscriptions: by at most one overall), and a member keeps as many of
  its current partitions as that balance allows (sticky).
- ``range`` (Kafka's RangeAssignor): per topic, the members subscribed to it, ordered by id, get consecutive ranges;
  the first ``partitions % members`` get one more than the others.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

#: A topic partition by topic name; a member's assignment is a set of them.
TopicPartition = tuple[str, int]

UNIFORM_ASSIGNOR = "uniform"
RANGE_ASSIGNOR = "range"


@dataclass(frozen=True)
class MemberSpec:
    """What an assignor knows of a member: the topics it subscribes to and the partitions it has now."""

    subscribed: frozenset[str]
    current: frozenset[TopicPartition] = field(default_factory=frozenset)


class Assignor(Protocol):
    name: str

    def assign(
        self, members: Mapping[str, MemberSpec], partitions: Mapping[str, int]
    ) -> dict[str, set[TopicPartition]]:
        """The target assignment of every member; ``partitions`` gives each existing topic's partition count."""
        ...


class UniformAssignor:
    """Balanced and sticky: keep what balance allows, give the rest to the least loaded eligible member, then move
    partitions from the most to the least loaded eligible member until no move narrows the gap."""

    name = UNIFORM_ASSIGNOR

    def assign(
        self, members: Mapping[str, MemberSpec], partitions: Mapping[str, int]
    ) -> dict[str, set[TopicPartition]]:
        if len({m.subscribed for m in members.values()}) == 1:
            return self._assign_homogeneous(members, partitions)
        ids = sorted(members)
        result: dict[str, set[TopicPartition]] = {m: set() for m in ids}
        eligible: dict[TopicPartition, list[str]] = {}
        for topic in sorted({t for m in ids for t in members[m].subscribed if t in partitions}):
            subscribers = [m for m in ids if topic in members[m].subscribed]
            for index in range(partitions[topic]):
                eligible[(topic, index)] = subscribers
        # Each member's fair share when everyone could take everything: an upper bound on what it keeps.
        total = len(eligible)
        quota = -(-total // len(ids)) if ids else 0
        owner: dict[TopicPartition, str] = {}
        for m in ids:
            kept = sorted(tp for tp in members[m].current if tp in eligible and tp not in owner)
            for tp in kept[:quota]:
                owner[tp] = m
                result[m].add(tp)
        for tp in sorted(eligible):
            if tp not in owner:
                m = min(eligible[tp], key=lambda c: (len(result[c]), c))
                owner[tp] = m
                result[m].add(tp)
        self._balance(result, owner, eligible)
        return result

    @staticmethod
    def _assign_homogeneous(
        members: Mapping[str, MemberSpec], partitions: Mapping[str, int]
    ) -> dict[str, set[TopicPartition]]:
        """Identical subscriptions (the usual case), in O(partitions log partitions): each member keeps up to its
        quota of its current partitions (``total // members``, one more for the first ``total % members`` that
        can use it), and the others fill the members below their quota in member order."""
        ids = sorted(members)
        topics = sorted(t for t in next(iter(members.values())).subscribed if t in partitions)
        every = [(t, p) for t in topics for p in range(partitions[t])]
        base, extra = divmod(len(every), len(ids))
        valid = set(every)
        result: dict[str, set[TopicPartition]] = {}
        leftovers: dict[str, list[TopicPartition]] = {}
        for m in ids:
            current = sorted(tp for tp in members[m].current if tp in valid)
            result[m] = set(current[:base])
            leftovers[m] = current[base:]
        for m in ids:
            if extra and leftovers[m]:
                result[m].add(leftovers[m][0])
                extra -= 1
        taken = {tp for tps in result.values() for tp in tps}
        free = iter(tp for tp in every if tp not in taken)
        for m in ids:
            while len(result[m]) < base:
                result[m].add(next(free))
        for m in ids:
            if extra and len(result[m]) == base:
                result[m].add(next(free))
                extra -= 1
        return result

    @staticmethod
    def _balance(
        result: dict[str, set[TopicPartition]],
        owner: dict[TopicPartition, str],
        eligible: dict[TopicPartition, list[str]],
    ) -> None:
        """Move single partitions from a member to an eligible one holding at least two fewer, the most loaded
        first, until there is no such move (each move lowers the sum of squared loads: it ends)."""
        moved = True
        while moved:
            moved = False
            for m in sorted(result, key=lambda c: (-len(result[c]), c)):
                for tp in sorted(result[m]):
                    target = min(eligible[tp], key=lambda c: (len(result[c]), c))
                    if len(result[target]) + 1 < len(result[m]):
                        result[m].discard(tp)
                        result[target].add(tp)
                        owner[tp] = target
                        moved = True
                if moved:
                    break


class RangeAssignor:
    """Per topic, consecutive ranges over its subscribers ordered by member id."""

    name = RANGE_ASSIGNOR

    def assign(
        self, members: Mapping[str, MemberSpec], partitions: Mapping[str, int]
    ) -> dict[str, set[TopicPartition]]:
        ids = sorted(members)
        result: dict[str, set[TopicPartition]] = {m: set() for m in ids}
        for topic in sorted({t for m in ids for t in members[m].subscribed if t in partitions}):
            subscribers = [m for m in ids if topic in members[m].subscribed]
            count = partitions[topic]
            base, extra = divmod(count, len(subscribers))
            start = 0
            for i, m in enumerate(subscribers):
                size = base + (1 if i < extra else 0)
                result[m].update((topic, p) for p in range(start, start + size))
                start += size
        return result


#: Kafka's ``group.consumer.assignors`` default: the assignors by name, the first being the default one.
ASSIGNORS: dict[str, Assignor] = {a.name: a for a in (UniformAssignor(), RangeAssignor())}
DEFAULT_ASSIGNOR = UNIFORM_ASSIGNOR
