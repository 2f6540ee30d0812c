"""Where the cluster keeps what in etcd, and the records stored there (JSON values, one record per key).

```
ROOT/cluster_id                  the cluster's id, written once by the first broker (create-if-absent)
ROOT/brokers/<id>                BrokerRegistration, under the broker's session lease: gone when the broker is
ROOT/controller                  the controller's broker id, under its lease; create revision = controller epoch
ROOT/shutting_down/<id>          present (empty, under the broker's session lease) while it is in controlled shutdown
ROOT/topics/<name>               TopicRecord: topic id, partition count, config overrides
ROOT/partitions/<topic id>/<p>   PartitionState: replicas, isr, leader, leader_epoch, partition_epoch
ROOT/producer_id_block           the end of the last producer id block claimed
ROOT/scram_credentials           every SCRAM credential of the cluster (the data dir file's JSON), once altered
```

Every value is a small JSON object; a change to partition state is a transaction guarded by the key's revision
(``EtcdClient.update``), so two writers never both act on one old state. Partitions are keyed by topic id (KIP-516),
not name: a topic deleted and created again gets a new id, so no state of the old one can be mistaken for the new
one's, and partition keys a failed or lost creation left behind belong to no topic record and are ignored.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from .connect import EtcdConnect


class Layout:
    """The keys of one cluster under its ``etcd.connect`` root."""

    def __init__(self, connect: EtcdConnect) -> None:
        self._connect = connect

    @property
    def root(self) -> str:
        """The prefix every key of the cluster starts with (ends with ``/``)."""
        return self._connect.key("")

    @property
    def cluster_id(self) -> str:
        return self._connect.key("cluster_id")

    @property
    def controller(self) -> str:
        return self._connect.key("controller")

    @property
    def producer_id_block(self) -> str:
        return self._connect.key("producer_id_block")

    @property
    def scram_credentials(self) -> str:
        return self._connect.key("scram_credentials")

    @property
    def brokers(self) -> str:
        return self._connect.key("brokers", "")

    @property
    def topics(self) -> str:
        return self._connect.key("topics", "")

    @property
    def partitions(self) -> str:
        return self._connect.key("partitions", "")

    def broker(self, broker_id: int) -> str:
        return self._connect.key("brokers", str(broker_id))

    def shutting_down(self, broker_id: int) -> str:
        """Present while ``broker_id`` is in controlled shutdown: no ISR takes it in (INELIGIBLE_REPLICA)."""
        return self._connect.key("shutting_down", str(broker_id))

    def topic(self, name: str) -> str:
        return self._connect.key("topics", name)

    def partition(self, topic_id: str, index: int) -> str:
        return self._connect.key("partitions", topic_id, str(index))

    def topic_partitions(self, topic_id: str) -> str:
        """The prefix of every partition key of the topic with id ``topic_id``."""
        return self._connect.key("partitions", topic_id, "")


@dataclass(frozen=True)
class BrokerRegistration:
    """A live broker: where clients and other brokers reach it, per listener name, and its rack."""

    broker_id: int
    endpoints: dict[str, tuple[str, int]]
    rack: str | None = None

    def to_json(self) -> bytes:
        endpoints = {name: [host, port] for name, (host, port) in self.endpoints.items()}
        return _dump({"broker_id": self.broker_id, "endpoints": endpoints, "rack": self.rack})

    @classmethod
    def from_json(cls, data: bytes) -> BrokerRegistration:
        raw = json.loads(data)
        endpoints = {name: (str(host), int(port)) for name, (host, port) in raw["endpoints"].items()}
        return cls(broker_id=int(raw["broker_id"]), endpoints=endpoints, rack=raw.get("rack"))


@dataclass(frozen=True)
class TopicRecord:
    """A topic as the controller created it (KIP-516's topic id, a UUID string) with its config overrides."""

    name: str
    topic_id: str
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return _dump(
            {"name": self.name, "topic_id": self.topic_id, "partitions": self.partitions, "configs": self.configs}
        )

    @classmethod
    def from_json(cls, data: bytes) -> TopicRecord:
        raw = json.loads(data)
        return cls(
            name=raw["name"],
            topic_id=raw["topic_id"],
            partitions=int(raw["partitions"]),
            configs=dict(raw.get("configs", {})),
        )


def _dump(value: object) -> bytes:
    return json.dumps(value, separators=(",", ":"), sort_keys=True).encode()
