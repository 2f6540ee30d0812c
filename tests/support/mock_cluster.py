"""librdkafka's in-process mock Kafka cluster, driven through ctypes.

The confluent-kafka wheel bundles librdkafka, which contains a complete Kafka-protocol mock broker
(``rd_kafka_mock_cluster_new``). It listens on 127.0.0.1 ports chosen by the OS and runs on its own threads,
so any client (confluent, kafka-python, aiokafka, kcat) can talk to it as to a real cluster.

Guaranteed: after ``start()`` returns, ``bootstrap`` is a ``host:port,...`` string whose brokers accept
connections; ``close()`` destroys the cluster and its owning handle exactly once.
"""

from __future__ import annotations

import ctypes
import glob
import os
from pathlib import Path
from types import TracebackType

import confluent_kafka

RD_KAFKA_PRODUCER = 0  # rd_kafka_type_t
_ERRSTR_SIZE = 512


def librdkafka_path() -> str:
    """Path of the librdkafka shared object bundled in the confluent-kafka wheel."""
    pkg_dir = Path(confluent_kafka.__file__).resolve().parent
    candidates = sorted(glob.glob(str(pkg_dir.parent / "confluent_kafka.libs" / "librdkafka*.so*")))
    candidates += sorted(glob.glob(str(pkg_dir / ".dylibs" / "librdkafka*.dylib")))
    if not candidates:
        raise FileNotFoundError(f"no bundled librdkafka next to {pkg_dir}")
    return candidates[0]


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(librdkafka_path(), mode=os.RTLD_NOW | ctypes.RTLD_GLOBAL)
    vp, cp, i = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    sigs: dict[str, tuple[list[object], object]] = {
        "rd_kafka_conf_new": ([], vp),
        "rd_kafka_conf_set": ([vp, cp, cp, cp, ctypes.c_size_t], i),
        "rd_kafka_new": ([i, vp, cp, ctypes.c_size_t], vp),
        "rd_kafka_destroy": ([vp], None),
        "rd_kafka_mock_cluster_new": ([vp, i], vp),
        "rd_kafka_mock_cluster_bootstraps": ([vp], cp),
        "rd_kafka_mock_cluster_destroy": ([vp], None),
        "rd_kafka_mock_topic_create": ([vp, cp, i, i], i),
        "rd_kafka_mock_set_controller_id": ([vp, ctypes.c_int32], i),
    }
    for name, (argtypes, restype) in sigs.items():
        fn = getattr(lib, name)
        fn.argtypes = argtypes
        fn.restype = restype
    return lib


class MockCluster:
    """A running librdkafka mock cluster with ``brokers`` nodes (node ids 1..N)."""

    def __init__(self, brokers: int = 1) -> None:
        self._brokers = brokers
        self._lib: ctypes.CDLL | None = None
        self._rk: int | None = None
        self._mcluster: int | None = None
        self.bootstrap = ""

    def start(self) -> MockCluster:
        """Create the owning rd_kafka_t handle and the cluster; idempotent."""
        if self._mcluster is not None:
            return self
        lib = self._lib = _load()
        conf = lib.rd_kafka_conf_new()
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        # The owning handle never connects anywhere; keep its logging quiet.
        lib.rd_kafka_conf_set(conf, b"log_level", b"3", errstr, _ERRSTR_SIZE)
        rk = lib.rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_SIZE)
        if not rk:
            raise RuntimeError(f"rd_kafka_new failed: {errstr.value.decode(errors='replace')}")
        self._rk = rk
        mcluster = lib.rd_kafka_mock_cluster_new(rk, self._brokers)
        if not mcluster:
            lib.rd_kafka_destroy(rk)
            self._rk = None
            raise RuntimeError("rd_kafka_mock_cluster_new failed")
        self._mcluster = mcluster
        # The mock reports no controller by default, which stalls admin clients until they time out.
        lib.rd_kafka_mock_set_controller_id(mcluster, 1)
        self.bootstrap = lib.rd_kafka_mock_cluster_bootstraps(mcluster).decode()
        return self

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1) -> None:
        """Create ``name`` directly in the mock (bypassing the protocol); raises on a non-zero error code."""
        if self._lib is None or self._mcluster is None:
            raise RuntimeError("mock cluster not started")
        err = self._lib.rd_kafka_mock_topic_create(self._mcluster, name.encode(), partitions, replication_factor)
        if err:
            raise RuntimeError(f"rd_kafka_mock_topic_create({name!r}) -> error {err}")

    def close(self) -> None:
        """Destroy the cluster, then its owning handle. Safe to call twice."""
        if self._lib is not None:
            if self._mcluster is not None:
                self._lib.rd_kafka_mock_cluster_destroy(self._mcluster)
                self._mcluster = None
            if self._rk is not None:
                self._lib.rd_kafka_destroy(self._rk)
                self._rk = None

    def __enter__(self) -> MockCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def main() -> None:
    """Run a mock cluster in the foreground and print its bootstrap (for dry-running the interop tests)."""
    import argparse
    import signal
    import sys
    import threading

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--brokers", type=int, default=1)
    args = parser.parse_args()
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    with MockCluster(args.brokers) as mc:
        print(mc.bootstrap, flush=True)
        sys.stdout.flush()
        while not stop.wait(0.5):
            pass


if __name__ == "__main__":
    main()
