"""One consumer-group member per stock client behind one small synchronous interface, for the group interop tests.

``make_member(client, bootstrap, topic, group, ...)`` returns an object with ``poll()`` (drives the client: joins,
heartbeats, rebalances), ``assigned()`` (the partitions it owns now), ``assignments`` (how many times partitions were
assigned to it), ``commit({partition: offset})``, ``committed(partitions)`` and ``close()``. confluent-kafka and
kafka-python are driven from the calling thread; aiokafka runs in its own event loop thread.

Run as a script (``python -m support.group_clients CLIENT BOOTSTRAP TOPIC GROUP SESSION_MS``) it joins, prints
``assigned`` once it owns partitions and keeps polling until killed: the member a test kills with SIGKILL.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import queue
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

CLIENTS = ("confluent", "kafka-python", "aiokafka")
HEARTBEAT_MS = 300


class GroupMember(Protocol):
    assignments: int

    def poll(self) -> None: ...
    def assigned(self) -> set[int]: ...
    def commit(self, offsets: dict[int, int]) -> None: ...
    def committed(self, partitions: Sequence[int]) -> dict[int, int | None]: ...
    def close(self) -> None: ...


class ConfluentMember:
    def __init__(self, bootstrap: str, topic: str, group: str, instance: str | None, session_ms: int) -> None:
        from confluent_kafka import Consumer

        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "session.timeout.ms": session_ms,
            "heartbeat.interval.ms": HEARTBEAT_MS,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "partition.assignment.strategy": "roundrobin",
        }
        if instance is not None:
            conf["group.instance.id"] = instance
        self.topic = topic
        self.assignments = 0
        self._consumer = Consumer(conf)
        self._consumer.subscribe([topic], on_assign=self._on_assign)

    def _on_assign(self, consumer: Any, partitions: list) -> None:
        self.assignments += 1

    def poll(self) -> None:
        self._consumer.poll(0.1)

    def assigned(self) -> set[int]:
        return {tp.partition for tp in self._consumer.assignment()}

    def commit(self, offsets: dict[int, int]) -> None:
        from confluent_kafka import TopicPartition

        partitions = [TopicPartition(self.topic, p, o) for p, o in offsets.items()]
        self._consumer.commit(offsets=partitions, asynchronous=False)

    def committed(self, partitions: Sequence[int]) -> dict[int, int | None]:
        from confluent_kafka import TopicPartition

        result = self._consumer.committed([TopicPartition(self.topic, p) for p in partitions], timeout=10)
        return {tp.partition: (tp.offset if tp.offset >= 0 else None) for tp in result}

    def close(self) -> None:
        self._consumer.close()


class _KafkaPythonConsumer:
    def __init__(self, bootstrap: str, topic: str, group: str, instance: str | None, session_ms: int) -> None:
        from kafka import KafkaConsumer
        from kafka.consumer.subscription_state import ConsumerRebalanceListener
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        member = self

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                pass

            def on_partitions_assigned(self, assigned: Any) -> None:
                member.assignments += 1

        self.topic = topic
        self.assignments = 0
        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            group_instance_id=instance,
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=HEARTBEAT_MS,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            partition_assignment_strategy=[RoundRobinPartitionAssignor],
        )
        # kafka-python joins the group without waiting for the subscribed topic's metadata (it waits only for
        # pattern subscriptions), so with no initial rebalance delay the first assignment can be empty and a rejoin
        # follows at once, which meets the client race described in test_groups.py. Fetching the topic's
        # partitions first gives the first join the metadata it needs.
        if not self._consumer.partitions_for_topic(topic):
            raise RuntimeError(f"kafka-python found no partitions for {topic}")
        self._consumer.subscribe([topic], listener=Listener())

    def poll(self) -> None:
        self._consumer.poll(timeout_ms=100)

    def assigned(self) -> set[int]:
        return {tp.partition for tp in self._consumer.assignment()}

    def commit(self, offsets: dict[int, int]) -> None:
        from kafka import OffsetAndMetadata, TopicPartition

        self._consumer.commit({TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in offsets.items()})

    def committed(self, partitions: Sequence[int]) -> dict[int, int | None]:
        from kafka import TopicPartition

        return {p: self._consumer.committed(TopicPartition(self.topic, p)) for p in partitions}

    def close(self) -> None:
        self._consumer.close()


class KafkaPythonMember:
    """A kafka-python member polled continuously by a thread of its own (a blocked JoinGroup of one member must
    not stop another from rejoining); every other call is run in that thread between polls."""

    def __init__(self, *args: Any) -> None:
        self._calls: queue.Queue[tuple[Callable[[], Any], concurrent.futures.Future]] = queue.Queue()
        self._stop = False
        ready: concurrent.futures.Future = concurrent.futures.Future()
        self._thread = threading.Thread(target=self._run, args=(args, ready), daemon=True)
        self._thread.start()
        self._member: _KafkaPythonConsumer = ready.result(60)

    def _run(self, args: tuple, ready: concurrent.futures.Future) -> None:
        try:
            member = _KafkaPythonConsumer(*args)
        except Exception as exc:
            ready.set_exception(exc)
            return
        ready.set_result(member)
        while not self._stop:
            try:
                call, future = self._calls.get_nowait()
            except queue.Empty:
                member.poll()
                continue
            try:
                future.set_result(call())
            except Exception as exc:
                future.set_exception(exc)

    def _call(self, call: Callable[[], Any]) -> Any:
        future: concurrent.futures.Future = concurrent.futures.Future()
        self._calls.put((call, future))
        return future.result(60)

    @property
    def assignments(self) -> int:
        return self._member.assignments

    def poll(self) -> None:
        time.sleep(0.1)

    def assigned(self) -> set[int]:
        return self._call(self._member.assigned)

    def commit(self, offsets: dict[int, int]) -> None:
        self._call(lambda: self._member.commit(offsets))

    def committed(self, partitions: Sequence[int]) -> dict[int, int | None]:
        return self._call(lambda: self._member.committed(partitions))

    def close(self) -> None:
        def close_and_stop() -> None:
            self._stop = True  # set in the polling thread itself, so it never polls the closed consumer
            self._member.close()

        try:
            self._call(close_and_stop)
        finally:
            self._stop = True
            self._thread.join(10)


class AiokafkaMember:
    """An AIOKafkaConsumer in an event loop of its own thread; calls are marshalled into that loop."""

    def __init__(self, bootstrap: str, topic: str, group: str, instance: str | None, session_ms: int) -> None:
        if instance is not None:
            raise ValueError("aiokafka has no static membership")
        self.topic = topic
        self.assignments = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        self._consumer = self._call(self._start(bootstrap, topic, group, session_ms))

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(60)

    async def _start(self, bootstrap: str, topic: str, group: str, session_ms: int) -> Any:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.abc import ConsumerRebalanceListener
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        member = self

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: Any) -> None:
                pass

            async def on_partitions_assigned(self, assigned: Any) -> None:
                member.assignments += 1

        consumer = AIOKafkaConsumer(
            bootstrap_servers=bootstrap,
            group_id=group,
            session_timeout_ms=session_ms,
            heartbeat_interval_ms=HEARTBEAT_MS,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            partition_assignment_strategy=(RoundRobinPartitionAssignor,),
        )
        consumer.subscribe([topic], listener=Listener())
        await consumer.start()
        self._poller = asyncio.ensure_future(self._poll_forever(consumer))
        return consumer

    @staticmethod
    async def _poll_forever(consumer: Any) -> None:
        while True:
            await consumer.getmany(timeout_ms=100)

    def poll(self) -> None:
        time.sleep(0.1)

    def assigned(self) -> set[int]:
        async def get() -> set[int]:
            return {tp.partition for tp in self._consumer.assignment()}

        return self._call(get())

    def commit(self, offsets: dict[int, int]) -> None:
        from aiokafka import TopicPartition

        self._call(self._consumer.commit({TopicPartition(self.topic, p): o for p, o in offsets.items()}))

    def committed(self, partitions: Sequence[int]) -> dict[int, int | None]:
        from aiokafka import TopicPartition

        async def get() -> dict[int, int | None]:
            return {p: await self._consumer.committed(TopicPartition(self.topic, p)) for p in partitions}

        return self._call(get())

    def close(self) -> None:
        async def stop() -> None:
            self._poller.cancel()
            await self._consumer.stop()

        try:
            self._call(stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)


_FACTORIES: dict[str, Callable[..., GroupMember]] = {
    "confluent": ConfluentMember,
    "kafka-python": KafkaPythonMember,
    "aiokafka": AiokafkaMember,
}


def make_member(
    client: str, bootstrap: str, topic: str, group: str, *, instance: str | None = None, session_ms: int = 6000
) -> GroupMember:
    return _FACTORIES[client](bootstrap, topic, group, instance, session_ms)


def drive(members: Sequence[GroupMember], until: Callable[[], bool], timeout_s: float = 30.0) -> None:
    """Poll every member in turn until ``until()`` holds; AssertionError after ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while not until():
        assert time.monotonic() < end, f"condition not reached in {timeout_s}s"
        for member in members:
            member.poll()


if __name__ == "__main__":
    client, bootstrap, topic, group, session_ms = sys.argv[1:6]
    member = make_member(client, bootstrap, topic, group, session_ms=int(session_ms))
    drive([member], lambda: bool(member.assigned()), timeout_s=60)
    print("assigned", flush=True)
    while True:
        member.poll()
