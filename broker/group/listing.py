"""ListGroups' filter, shared by the classic and the KIP-848 coordinator (Kafka's GroupMetadataManager.listGroups).

Guaranteed: a group is listed when its state is one of ``states`` (compared case-insensitively, each filter value
trimmed) and the coordinator's group type is one of ``types`` (case-insensitively); an empty filter passes all, and a
type Kafka does not know matches none.
"""

from __future__ import annotations

from collections.abc import Iterable


def listed_groups(
    groups: Iterable[tuple[str, str, str]], states: Iterable[str], types: Iterable[str], group_type: str
) -> list[dict]:
    """ListGroups entries of ``groups`` (each ``(group id, protocol type, state name)``) of type ``group_type``."""
    wanted = {s.strip().lower() for s in states}
    if (kinds := {t.lower() for t in types}) and group_type not in kinds:
        return []
    return [
        {"group_id": group_id, "protocol_type": protocol_type, "group_state": state, "group_type": group_type}
        for group_id, protocol_type, state in groups
        if not wanted or state.lower() in wanted
    ]
