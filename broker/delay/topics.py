"""The delay topics the broker creates on first use (a Metadata request naming them), as Kafka creates
``__consumer_offsets``: whatever ``auto.create.topics.enable`` says.

Level topics (``__delay-<level>`` of ``delay.levels``) take ``delay.topic.num.partitions`` partitions and the broker's
retention (records in them carry their entry time as timestamp, so time retention counts from there: keep it above
the longest level plus the longest outage of the DelayService). The cancel topic is compacted, one partition.
"""

from __future__ import annotations

from typing import Protocol

from oncelog.client.delay import CANCEL_TOPIC, level_of_topic, parse_levels

#: delay.topic.num.partitions default (oncelog's own): partitions of each delay-level topic.
DELAY_TOPIC_NUM_PARTITIONS = 1
CANCEL_TOPIC_CONFIGS = {"cleanup.policy": "compact"}


class DelaySettings(Protocol):
    """The broker settings read here (``BrokerConfig``; not imported: broker/config.py imports this module's
    default)."""

    def get_str(self, name: str) -> str: ...

    def get_int(self, name: str) -> int: ...


def delay_topic_spec(config: DelaySettings, name: str) -> tuple[int, dict[str, str]] | None:
    """(partitions, configs) of ``name`` when it is a delay topic this broker creates on first use, else None."""
    if not name.startswith("__delay-"):
        return None
    if name == CANCEL_TOPIC:
        return 1, dict(CANCEL_TOPIC_CONFIGS)
    if level_of_topic(parse_levels(config.get_str("delay.levels")), name) is None:
        return None
    return config.get_int("delay.topic.num.partitions"), {}
