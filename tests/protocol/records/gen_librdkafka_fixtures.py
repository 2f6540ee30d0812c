"""Regenerate fixtures/librdkafka_*.bin: record batches exactly as librdkafka writes them.

Not a test. Starts librdkafka's mock cluster through ctypes (the library bundled with confluent-kafka),
produces with each compression codec (idempotent, with headers, null key/value), then fetches the raw
partition log with a hand-built Fetch v4 request so the bytes are the producer's, untouched.

    .venv/bin/python tests/protocol/records/gen_librdkafka_fixtures.py
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import socket
import struct

import confluent_kafka

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "fixtures")
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _lib() -> ctypes.CDLL:
    libdir = os.path.join(os.path.dirname(os.path.dirname(confluent_kafka.__file__)), "confluent_kafka.libs")
    lib = ctypes.CDLL(glob.glob(os.path.join(libdir, "librdkafka*.so*"))[0])
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_mock_cluster_new.restype = ctypes.c_void_p
    lib.rd_kafka_mock_cluster_new.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.rd_kafka_mock_cluster_bootstraps.restype = ctypes.c_char_p
    lib.rd_kafka_mock_cluster_bootstraps.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_mock_topic_create.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
    return lib


def _fetch_raw(bootstrap: str, topic: str) -> bytes:
    """Fetch v4 of partition 0 from offset 0; returns the records field verbatim."""
    host, port = bootstrap.split(",")[0].rsplit(":", 1)
    t = topic.encode()
    body = struct.pack(">hhih", 1, 4, 7, 3) + b"gen"  # Fetch, v4, correlation id, client id
    body += struct.pack(">iiiib", -1, 100, 1, 50_000_000, 0)  # replica, max wait, min/max bytes, isolation
    body += struct.pack(">ih", 1, len(t)) + t + struct.pack(">iiqi", 1, 0, 0, 50_000_000)
    with socket.create_connection((host, int(port))) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv(sock, 4))[0]
        resp = _recv(sock, size)
    pos = 4 + 4 + 4  # correlation id, throttle, topic count
    (tlen,) = struct.unpack_from(">h", resp, pos)
    pos += 2 + tlen + 4  # topic, partition count
    _partition, error, _hw, _lso, naborted = struct.unpack_from(">ihqqi", resp, pos)
    assert error == 0, error
    pos += 4 + 2 + 8 + 8 + 4 + max(naborted, 0) * 16
    (rlen,) = struct.unpack_from(">i", resp, pos)
    return resp[pos + 4 : pos + 4 + rlen]


def _recv(sock: socket.socket, n: int) -> bytes:
    buf = b""
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def main() -> None:
    lib = _lib()
    errstr = ctypes.create_string_buffer(512)
    rk = lib.rd_kafka_new(0, lib.rd_kafka_conf_new(), errstr, 512)
    mcluster = lib.rd_kafka_mock_cluster_new(rk, 1)
    bootstrap = lib.rd_kafka_mock_cluster_bootstraps(mcluster).decode()
    os.makedirs(FIXTURES, exist_ok=True)
    expected = []
    for i in range(30):
        key = None if i % 7 == 3 else b"key-%d" % i
        value = None if i % 11 == 5 else (b"value-%d " % i) * (1 + i % 5)
        headers = [("h\u00e9", b"v%d" % i), ("null", None)] if i % 2 else []
        expected.append(
            {
                "key": key and key.hex(),
                "value": value and value.hex(),
                "headers": [[k, v and v.hex()] for k, v in headers],
            }
        )
    for codec in CODECS:
        topic = f"t-{codec}"
        lib.rd_kafka_mock_topic_create(mcluster, topic.encode(), 1, 1)
        producer = confluent_kafka.Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.codec": codec,
                "enable.idempotence": True,
                "linger.ms": 50,
            }
        )
        for i, item in enumerate(expected):
            producer.produce(
                topic,
                key=item["key"] and bytes.fromhex(item["key"]),
                value=item["value"] and bytes.fromhex(item["value"]),
                partition=0,
                headers=[(k, v and bytes.fromhex(v)) for k, v in item["headers"]] or None,
                timestamp=1_700_000_000_000 + i,
            )
        assert producer.flush(10) == 0
        raw = _fetch_raw(bootstrap, topic)
        with open(os.path.join(FIXTURES, f"librdkafka_{codec}.bin"), "wb") as f:
            f.write(raw)
        print(codec, len(raw), raw[:70].hex())
    with open(os.path.join(FIXTURES, "librdkafka_expected.json"), "w") as f:
        json.dump({"librdkafka": confluent_kafka.libversion()[0], "records": expected}, f, indent=0)


if __name__ == "__main__":
    main()
