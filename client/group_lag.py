"""The ``kafka-consumer-groups.sh --describe`` table: per partition of a group, its committed offset, the log-end
offset, the lag between them and the member it is assigned to.

Rows cover every partition the group has a committed offset for or a member is assigned (restricted to ``topics``
when given, which also adds their partitions without either). A value that is unknown is None (``-`` in the table,
``null`` in JSON): the current offset of a partition never committed, the lag without both offsets, the member
columns of a partition no member holds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass

from oncelog.client.admin import GroupDescription
from oncelog.client.types import TopicPartition

#: Kafka's column headings, in order.
COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID")


@dataclass(frozen=True)
class LagRow:
    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    lag: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None


def group_partitions(
    description: GroupDescription,
    committed: Mapping[TopicPartition, int],
    extra_partitions: Iterable[TopicPartition] = (),
    topics: Iterable[str] | None = None,
) -> list[TopicPartition]:
    """The partitions the rows of one group cover, sorted (see the module docstring)."""
    assigned = (tp for member in description.members for tp in member.assignment)
    wanted = None if topics is None else set(topics)
    return sorted(p for p in {*committed, *assigned, *extra_partitions} if wanted is None or p.topic in wanted)


def lag_rows(
    description: GroupDescription,
    committed: Mapping[TopicPartition, int],
    end_offsets: Mapping[TopicPartition, int],
    partitions: Iterable[TopicPartition],
) -> list[LagRow]:
    """One row per partition of ``partitions`` (``group_partitions``), in that order."""
    owner = {tp: member for member in description.members for tp in member.assignment}
    rows = []
    for tp in partitions:
        current, end, member = committed.get(tp), end_offsets.get(tp), owner.get(tp)
        rows.append(
            LagRow(
                description.group_id,
                tp.topic,
                tp.partition,
                current,
                end,
                end - current if current is not None and end is not None else None,
                member.member_id if member else None,
                member.client_host if member else None,
                member.client_id if member else None,
            )
        )
    return rows


def format_table(rows: Iterable[LagRow]) -> str:
    """The rows under COLUMNS, each column as wide as its widest cell, ``-`` for unknown values."""
    cells = [COLUMNS, *(tuple("-" if v is None else str(v) for v in asdict(row).values()) for row in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    return "\n".join(
        " ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip() for line in cells
    )


def as_json(rows: Iterable[LagRow]) -> list[dict[str, object]]:
    """The rows as JSON objects (snake_case keys, null for unknown values)."""
    return [asdict(row) for row in rows]
