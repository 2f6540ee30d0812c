"""Follower fetches and the decode ration, by hand: two brokers on etcd, a topic of 2,200 partitions with two
replicas, so each follower's Fetch lists the 1,100 partitions its leader leads (36 KB, above the 32 KiB from which a
request is decoded in the worker thread). Prints the latency of acks=all produce requests of one record to broker 1's
partitions (each waits for broker 2's fetch), alone and then while one hostile client keeps the decode ration of
broker 1 busy with 90,000-name Metadata requests. A registered follower's fetches are not rationed
(``broker/replication/fetcher_identity.py``), so the second figure stays near the first.

Not collected by pytest (CI checks the exemption in ``tests/broker/test_loop_steps.py``); about 1-4 minutes::

    flock /work/wt/bench.lock .venv/bin/python tests/torture/follower_ration.py
"""

from __future__ import annotations

import socket
import statistics
import struct
import sys
import threading
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make ``support`` importable

from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic
from oncelog.protocol import ApiKey, encode_request
from support.cluster import Cluster

#: Each broker leads half: a follower's Fetch lists 1,100 partitions.
PARTITIONS = 2200
#: Produce requests timed in each phase.
SAMPLES = 40


def hostile(port: int, stop: threading.Event, counter: list[int]) -> None:
    """Send 90,000-name Metadata requests one after the other until ``stop``; count the answers."""
    names = [{"name": f"no-such-topic-{i:06d}"} for i in range(90_000)]
    data = encode_request(ApiKey.METADATA, 4, 1, "hostile", {"topics": names, "allow_auto_topic_creation": False})
    frame = struct.pack(">i", len(data)) + data
    with socket.create_connection(("127.0.0.1", port)) as sock:
        while not stop.is_set():
            sock.sendall(frame)
            (size,) = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))
            left = size
            while left:
                left -= len(sock.recv(min(left, 1 << 20)))
            counter[0] += 1


def latencies(producer: Producer, partitions: list[int]) -> list[float]:
    """Seconds each of ``SAMPLES`` acks=all produce requests of one record took, one at a time."""
    out = []
    for i in range(SAMPLES):
        start = time.monotonic()
        producer.produce("wide", b"v", partition=partitions[i % len(partitions)])
        assert producer.flush(30) == 0
        out.append(time.monotonic() - start)
    return out


def main() -> None:
    with Cluster(2) as cluster:
        admin = cluster.admin()
        admin.create_topics([NewTopic("wide", PARTITIONS, 2)], operation_timeout=120)["wide"].result(180)
        md = cluster.wait_for(
            lambda m: (
                "wide" in m.topics
                and len(m.topics["wide"].partitions) == PARTITIONS
                and all(len(p.isrs) == 2 for p in m.topics["wide"].partitions.values())
            ),
            "full ISRs",
            timeout_s=300,
        )
        led_by_1 = [p for p, meta in md.topics["wide"].partitions.items() if meta.leader == 1]
        print(f"partitions led by broker 1: {len(led_by_1)}", flush=True)
        producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all", "linger.ms": 0})
        latencies(producer, led_by_1)  # warm up
        alone = latencies(producer, led_by_1)
        stop, counter = threading.Event(), [0]
        thread = threading.Thread(target=hostile, args=(cluster.brokers[1].port, stop, counter), daemon=True)
        thread.start()
        time.sleep(3)
        loaded = latencies(producer, led_by_1)
        stop.set()
        thread.join(60)
        for name, values in (("alone", alone), ("hostile", loaded)):
            p50, p95 = statistics.median(values) * 1000, statistics.quantiles(values, n=20)[18] * 1000
            print(f"{name}: p50 {p50:.0f} ms p95 {p95:.0f} ms max {max(values) * 1000:.0f} ms", flush=True)
        print(f"hostile Metadata requests answered: {counter[0]}", flush=True)


if __name__ == "__main__":
    main()
