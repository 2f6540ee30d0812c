"""Interop: confluent-kafka (librdkafka) consumers with ``group.protocol=consumer`` (KIP-848).

Two members share a topic: a second member joining and one leaving rebalance it with every record consumed exactly
once across the rebalances (offsets committed per record); an exactly-once copy (transactional producer,
send_offsets_to_transaction with a KIP-848 consumer's group metadata) writes exactly its input, with a second copier
joining mid-way; the admin client lists the group as a ``consumer`` group and describes its members' assignments.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from confluent_kafka import (
    Consumer,
    ConsumerGroupType,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from support.broker import BrokerProcess

PARTITIONS = 4
DEADLINE_S = 30.0
#: Heartbeats every 500 ms (Kafka's default and minimum: 5 s), so a rebalance completes within a second or two.
KIP848_SETTINGS = {
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    "offsets.topic.num.partitions": "4",  # fewer logs to create and reload (restart)
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess | None]:
    from conftest import GROUP_SETTINGS, external_bootstrap

    if external_bootstrap():
        yield None
        return
    proc = BrokerProcess(tmp_path_factory.mktemp("broker") / "data", settings={**GROUP_SETTINGS, **KIP848_SETTINGS})
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


def _consumer(bootstrap: str, group: str, name: str, **extra: str) -> Consumer:
    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": "consumer",
            "client.id": name,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **extra,
        }
    )


def _produce(bootstrap: str, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    for i in values:
        producer.produce(topic, str(i).encode(), partition=i % PARTITIONS)
    assert producer.flush(DEADLINE_S) == 0


def _assigned(consumer: Consumer) -> set[int]:
    return {tp.partition for tp in consumer.assignment()}


class Member:
    """A consumer that commits each record it processes before taking the next (synchronously)."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        name: str,
        seen: list[tuple[str, int, int, str]],
        instance: str | None = None,
    ):
        self.name = name
        self.seen = seen
        extra = {"group.instance.id": instance} if instance is not None else {}
        self.consumer = _consumer(bootstrap, group, name, **extra)
        #: Assignment changes the client was told of (incremental assign, revoke or lost partitions).
        self.changes = 0
        self.consumer.subscribe([topic], on_assign=self._changed, on_revoke=self._changed, on_lost=self._changed)

    def _changed(self, _consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if partitions:
            self.changes += 1

    def poll(self) -> None:
        message = self.consumer.poll(0.05)
        if message is None:
            return
        assert message.error() is None, message.error()
        self.seen.append((self.name, message.partition(), message.offset(), message.value().decode()))
        self.consumer.commit(message=message, asynchronous=False)


def _drive(members: list[Member], until, what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not until():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        for m in members:
            m.poll()
        owners = [p for m in members for p in _assigned(m.consumer)]
        assert len(owners) == len(set(owners)), f"a partition with two owners: {owners}"


def test_join_rebalance_and_leave_consume_every_record_once(bootstrap: str, make_topic) -> None:
    topic = make_topic("kip848", PARTITIONS)
    group = f"{topic}-group"
    seen: list[tuple[str, int, int, str]] = []
    _produce(bootstrap, topic, range(0, 100))
    a = Member(bootstrap, topic, group, "a", seen)
    b = None
    try:
        _drive([a], lambda: len(seen) >= 30, "member a to consume")
        assert _assigned(a.consumer) == set(range(PARTITIONS))
        b = Member(bootstrap, topic, group, "b", seen)
        members = [a, b]
        _drive(members, lambda: len(_assigned(a.consumer)) == 2 and len(_assigned(b.consumer)) == 2, "a rebalance")
        _produce(bootstrap, topic, range(100, 200))
        _drive(members, lambda: len(seen) >= 200, "both members to consume")
        assert {name for name, *_ in seen[-80:]} == {"a", "b"}
        b.consumer.close()
        members = [a]
        _drive(members, lambda: _assigned(a.consumer) == set(range(PARTITIONS)), "a to take every partition")
        _produce(bootstrap, topic, range(200, 300))
        _drive(members, lambda: len(seen) >= 300, "member a to consume the rest")
        time.sleep(0.3)
        a.poll()
    finally:
        a.consumer.close()
    values = sorted(int(v) for *_, v in seen)
    assert values == list(range(300)), "a record lost or consumed twice"
    positions = [(p, o) for _, p, o, _ in seen]
    assert len(positions) == len(set(positions))


def _copy_step(consumer: Consumer, producer: Producer, out: str) -> int:
    """Copy what one poll returns in one transaction; on a failed offset commit abort and rewind."""
    messages = consumer.consume(50, 0.1)
    if not messages:
        return 0
    for m in messages:
        assert m.error() is None, m.error()
    producer.begin_transaction()
    for m in messages:
        producer.produce(out, m.value(), partition=m.partition())
    positions = consumer.position(consumer.assignment())
    try:
        producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), DEADLINE_S)
        producer.commit_transaction(DEADLINE_S)
    except KafkaException as exc:
        if not exc.args[0].txn_requires_abort():
            raise
        producer.abort_transaction(DEADLINE_S)
        committed = consumer.committed(consumer.assignment(), DEADLINE_S)
        for tp in committed:
            consumer.seek(TopicPartition(tp.topic, tp.partition, max(tp.offset, 0)))
        return 0
    return len(messages)


def test_exactly_once_copy_with_a_kip848_group(bootstrap: str, make_topic) -> None:
    source = make_topic("kip848-in", PARTITIONS)
    out = make_topic("kip848-out", PARTITIONS)
    group = f"{source}-copier"
    count = 600
    copiers: list[tuple[Consumer, Producer]] = []
    copied = {"c1": 0, "c2": 0}

    def copy_until(total: int, until=lambda: True) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while sum(copied.values()) < total or not until():
            assert time.monotonic() < deadline, f"copied {copied} of {total}"
            for name, (consumer, producer) in zip(copied, copiers, strict=False):
                copied[name] += _copy_step(consumer, producer, out)

    try:
        for name in copied:
            consumer = _consumer(bootstrap, group, name, **{"isolation.level": "read_committed"})
            producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{group}-{name}"})
            producer.init_transactions(DEADLINE_S)
            copiers.append((consumer, producer))
        copiers[0][0].subscribe([source])
        _produce(bootstrap, source, range(count // 2))
        copy_until(count // 2)
        # The second copier joins: the group rebalances (revocation before assignment) while both keep copying.
        copiers[1][0].subscribe([source])
        copy_until(count // 2, lambda: all(len(_assigned(c)) == PARTITIONS // 2 for c, _ in copiers))
        first = dict(copied)
        _produce(bootstrap, source, range(count // 2, count))
        copy_until(count)
        assert copied["c1"] > first["c1"] and copied["c2"] > first["c2"], copied
    finally:
        for consumer, producer in copiers:
            consumer.close()
            producer.flush(5)
    reader = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"{out}-reader",
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
        }
    )
    try:
        reader.assign([TopicPartition(out, p, 0) for p in range(PARTITIONS)])
        values: list[int] = []
        deadline = time.monotonic() + DEADLINE_S
        while len(values) < count and time.monotonic() < deadline:
            m = reader.poll(0.2)
            if m is not None and m.error() is None:
                values.append(int(m.value()))
        time.sleep(0.5)
        while (m := reader.poll(0.2)) is not None:
            if m.error() is None:
                values.append(int(m.value()))
    finally:
        reader.close()
    assert sorted(values) == list(range(count))


def test_admin_lists_and_describes_a_consumer_group(bootstrap: str, make_topic) -> None:
    topic = make_topic("kip848-admin", PARTITIONS)
    group = f"{topic}-group"
    seen: list[tuple[str, int, int, str]] = []
    member = Member(bootstrap, topic, group, "solo", seen)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    try:
        _drive([member], lambda: _assigned(member.consumer) == set(range(PARTITIONS)), "an assignment")
        listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(DEADLINE_S)
        assert [(g.group_id, g.type) for g in listed.valid if g.group_id == group] == [
            (group, ConsumerGroupType.CONSUMER)
        ]
        classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(DEADLINE_S)
        assert group not in {g.group_id for g in classic.valid}
        description = admin.describe_consumer_groups([group])[group].result(DEADLINE_S)
        assert description.type == ConsumerGroupType.CONSUMER
        assert [m.client_id for m in description.members] == ["solo"]
        assigned = description.members[0].assignment.topic_partitions
        assert sorted(tp.partition for tp in assigned) == list(range(PARTITIONS))
    finally:
        member.consumer.close()


def test_classic_member_is_refused_while_the_consumer_group_has_members(bootstrap: str, make_topic) -> None:
    topic = make_topic("kip848-mixed", PARTITIONS)
    group = f"{topic}-group"
    seen: list[tuple[str, int, int, str]] = []
    member = Member(bootstrap, topic, group, "new", seen)
    classic = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "group.protocol": "classic"})
    try:
        _drive([member], lambda: _assigned(member.consumer) == set(range(PARTITIONS)), "an assignment")
        classic.subscribe([topic])
        deadline = time.monotonic() + DEADLINE_S
        error = None
        while error is None and time.monotonic() < deadline:
            m = classic.poll(0.2)
            if m is not None and m.error() is not None:
                error = m.error()
        assert error is not None and error.code() == KafkaError.INCONSISTENT_GROUP_PROTOCOL
    finally:
        classic.close()
        member.consumer.close()


@pytest.fixture
def own_broker(tmp_path) -> Iterator[BrokerProcess]:
    from conftest import ENV_BOOTSTRAP, GROUP_SETTINGS, external_bootstrap

    if external_bootstrap():
        pytest.skip(f"{ENV_BOOTSTRAP} is set: cannot restart an external broker")
    proc = BrokerProcess(tmp_path / "data", settings={**GROUP_SETTINGS, **KIP848_SETTINGS})
    try:
        proc.start()
        yield proc
    finally:
        proc.close()


def test_members_rejoin_after_a_broker_restart_without_duplicates(own_broker: BrokerProcess) -> None:
    """The group is loaded back from ``__consumer_offsets``: the members go on with their epochs and partitions
    after a hard restart; no partition has two owners and no record is lost or consumed twice."""
    from support.topics import create_topic_confluent

    bootstrap = own_broker.bootstrap
    topic = "kip848-restart"
    create_topic_confluent(bootstrap, topic, PARTITIONS)
    group = f"{topic}-group"
    seen: list[tuple[str, int, int, str]] = []
    _produce(bootstrap, topic, range(100))
    a = Member(bootstrap, topic, group, "a", seen)
    b = Member(bootstrap, topic, group, "b", seen)
    try:
        _drive([a, b], lambda: len(seen) >= 100 and len(_assigned(a.consumer)) == PARTITIONS // 2, "consumption")
        before = (a.changes, b.changes, _assigned(a.consumer), _assigned(b.consumer))
        own_broker.restart(hard=True)
        _produce(bootstrap, topic, range(100, 200))
        _drive([a, b], lambda: len(seen) >= 200, "the members to consume after the restart")
        # No rebalance: the members kept their partitions through the restart.
        assert (a.changes, b.changes, _assigned(a.consumer), _assigned(b.consumer)) == before
    finally:
        a.consumer.close()
        b.consumer.close()
    assert sorted(int(v) for *_, v in seen) == list(range(200))


def test_regex_subscription_takes_matching_topics_also_created_later(bootstrap: str, make_topic) -> None:
    """librdkafka sends a ``^``-pattern as SubscribedTopicRegex (v1); a topic created later that matches joins."""
    first = make_topic("kip848rx", 2)
    prefix = first.rsplit("-", 2)[0]
    group = f"{first}-group"
    consumer = _consumer(bootstrap, group, "rx")
    try:
        consumer.subscribe([f"^{prefix}-.*"])
        deadline = time.monotonic() + DEADLINE_S
        while {(tp.topic, tp.partition) for tp in consumer.assignment()} != {(first, 0), (first, 1)}:
            assert time.monotonic() < deadline
            consumer.poll(0.1)
        second = make_topic("kip848rx", 3)
        expected = {(first, 0), (first, 1), (second, 0), (second, 1), (second, 2)}
        while {(tp.topic, tp.partition) for tp in consumer.assignment()} != expected:
            assert time.monotonic() < deadline, consumer.assignment()
            consumer.poll(0.1)
    finally:
        consumer.close()


def test_static_member_comes_back_to_its_partitions_without_a_rebalance(bootstrap: str, make_topic) -> None:
    """``group.instance.id``: a closing static member leaves with epoch -2; its successor gets its partitions back
    and the other member sees no change."""
    topic = make_topic("kip848-static", PARTITIONS)
    group = f"{topic}-group"
    seen: list[tuple[str, int, int, str]] = []
    members = [Member(bootstrap, topic, group, name, seen, instance=name) for name in ("a", "b")]
    try:
        _drive(members, lambda: all(len(_assigned(m.consumer)) == PARTITIONS // 2 for m in members), "assignments")
        a, b = members
        before = (_assigned(a.consumer), _assigned(b.consumer), b.changes)
        a.consumer.close()
        members[0] = a = Member(bootstrap, topic, group, "a", seen, instance="a")
        _drive(members, lambda: len(_assigned(a.consumer)) == PARTITIONS // 2, "the static member's return")
        for _ in range(10):
            b.poll()
        assert (_assigned(a.consumer), _assigned(b.consumer), b.changes) == before
    finally:
        for m in members:
            m.consumer.close()
