"""docker-compose.yml, without Docker: its etcd and brokers are started here with the very commands and settings the
compose file gives them (service host names become 127.0.0.1, each container port and published port a free port,
volumes temporary folders), and the cluster they make is checked with stock clients: every broker registered, each
listener advertising its own addresses, a replicated topic, a round trip through the host-side listener, and the
health checks of the compose file and of the image answering."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from support.dockerfile import exec_form, read_stages
from support.ports import can_connect, free_port

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict] = COMPOSE["services"]
BROKERS = sorted(name for name in SERVICES if name != "etcd")
#: ``HOST:PORT`` inside an argument (``http://etcd:2379``, ``EXTERNAL://localhost:19092``, ``0.0.0.0:9092``).
ADDRESS = re.compile(r"(?P<host>[A-Za-z0-9.\-]+):(?P<port>\d+)")
LOCAL_HOSTS = {"0.0.0.0", "127.0.0.1"}
START_DEADLINE_S = 30.0


def published(service: str) -> dict[int, int]:
    """Host port -> container port of the service's ``ports``."""
    pairs = (entry.split(":") for entry in SERVICES[service].get("ports", []))
    return {int(host): int(container) for host, container in pairs}


class Translation:
    """Maps each (service, container port) to a free loopback port, and rewrites arguments with it."""

    def __init__(self) -> None:
        self.ports: dict[tuple[str, int], int] = {}

    def port(self, service: str, container_port: int) -> int:
        return self.ports.setdefault((service, container_port), free_port())

    def address(self, service: str, host: str, port: int) -> tuple[str, int]:
        if host in LOCAL_HOSTS:
            return "127.0.0.1", self.port(service, port)
        if host == "localhost":  # the host side: whichever service publishes that port
            owner = next(s for s in SERVICES if port in published(s))
            return "127.0.0.1", self.port(owner, published(owner)[port])
        assert host in SERVICES, f"{host!r} is neither a service nor a local address"
        return "127.0.0.1", self.port(host, port)

    def arg(self, service: str, text: str, volumes: dict[str, Path]) -> str:
        def swap(match: re.Match[str]) -> str:
            host, port = self.address(service, match["host"], int(match["port"]))
            return f"{host}:{port}"

        text = ADDRESS.sub(swap, text)
        for mount, folder in volumes.items():
            text = text.replace(mount, str(folder))
        return text


def volumes_of(service: str, root: Path) -> dict[str, Path]:
    """Container mount point -> a fresh folder for it."""
    mounts = {}
    for entry in SERVICES[service].get("volumes", []):
        name, mount = entry.split(":")
        mounts[mount] = root / name
        mounts[mount].mkdir(parents=True)
    return mounts


def wait_until(check, what: str, deadline_s: float = START_DEADLINE_S) -> None:  # type: ignore[no-untyped-def]
    end = time.monotonic() + deadline_s
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class ComposeOutsideDocker:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.translation = Translation()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.volumes = {service: volumes_of(service, root / service) for service in SERVICES}
        self.oncelog = str(Path(sys.executable).parent / "oncelog")

    def argv(self, service: str) -> list[str]:
        spec = SERVICES[service]
        if service == "etcd":
            entrypoint = ["etcd"]  # docker/etcd/Dockerfile's ENTRYPOINT
        else:
            entrypoint = list(spec["entrypoint"])
            assert entrypoint[0] == "oncelog"
            entrypoint[0] = self.oncelog
        return [self.translation.arg(service, a, self.volumes[service]) for a in entrypoint + spec["command"]]

    def start(self, service: str) -> None:
        log = open(self.root / f"{service}.log", "wb")  # noqa: SIM115 (closed with the process)
        self.procs[service] = subprocess.Popen(
            self.argv(service), stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
        )

    def healthcheck(self, service: str, test: list[str]) -> int:
        assert test[0] == "CMD"
        argv = [self.translation.arg(service, a, {}) for a in test[1:]]
        if argv[0] == "oncelog":
            argv[0] = self.oncelog
        return subprocess.run(argv, capture_output=True, timeout=30, check=False).returncode

    def external_bootstrap(self) -> str:
        return ",".join(
            f"127.0.0.1:{self.translation.port(b, container)}" for b in BROKERS for container in published(b).values()
        )

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="module")
def compose() -> Iterator[ComposeOutsideDocker]:
    if shutil.which("etcd") is None:
        pytest.fail("etcd is not installed: python3 dev.py test installs Debian's etcd-server")
    with tempfile.TemporaryDirectory(prefix="oncelog-compose-") as tmp:
        running = ComposeOutsideDocker(Path(tmp))
        try:
            running.start("etcd")
            etcd_test = SERVICES["etcd"]["healthcheck"]["test"]
            wait_until(lambda: running.healthcheck("etcd", etcd_test) == 0, "etcd healthy (its compose health check)")
            for broker in BROKERS:
                running.start(broker)
            for broker in BROKERS:
                for (service, _), port in list(running.translation.ports.items()):
                    if service == broker:
                        wait_until(lambda port=port: can_connect("127.0.0.1", port), f"{broker} listening")
            yield running
        finally:
            running.close()


def test_the_compose_file_describes_etcd_and_three_brokers_reachable_from_the_host() -> None:
    assert BROKERS == ["broker1", "broker2", "broker3"]
    node_ids = set()
    for broker in BROKERS:
        spec = SERVICES[broker]
        assert spec["build"] == "."
        assert spec["depends_on"] == {"etcd": {"condition": "service_healthy"}}
        assert any(v.endswith(":/data") for v in spec["volumes"])
        args = dict(a.removeprefix("--").split("=", 1) for a in spec["command"])
        node_ids.add(args["node-id"])
        assert args["set"].startswith("etcd.connect=etcd:2379")
        external = re.search(r"EXTERNAL://localhost:(\d+)", args["advertise"])
        assert external and int(external[1]) in published(broker), "the host-side listener is published as advertised"
        # The image's own HEALTHCHECK dials 127.0.0.1:9092: the INTERNAL listener must be there.
        assert "INTERNAL://0.0.0.0:9092" in args["listen"]
    assert len(node_ids) == 3
    assert SERVICES["etcd"]["healthcheck"]["test"][1] == "etcdctl"


def test_the_brokers_form_one_cluster_and_serve_clients_on_the_host_listener(compose: ComposeOutsideDocker) -> None:
    admin = AdminClient({"bootstrap.servers": compose.external_bootstrap()})
    deadline = time.monotonic() + START_DEADLINE_S
    while True:
        metadata = admin.list_topics(timeout=10)
        if len(metadata.brokers) == 3 and metadata.controller_id > 0:
            break
        assert time.monotonic() < deadline, f"brokers: {metadata.brokers}"
        time.sleep(0.2)
    external_ports = {compose.translation.port(b, c) for b in BROKERS for c in published(b).values()}
    assert {b.port for b in metadata.brokers.values()} == external_ports  # EXTERNAL clients get EXTERNAL addresses
    internal = AdminClient({"bootstrap.servers": f"127.0.0.1:{compose.translation.port('broker1', 9092)}"})
    internal_ports = {b.port for b in internal.list_topics(timeout=10).brokers.values()}
    assert internal_ports == {compose.translation.port(b, 9092) for b in BROKERS}

    admin.create_topics([NewTopic("compose-check", num_partitions=3, replication_factor=3)])["compose-check"].result(60)
    producer = Producer({"bootstrap.servers": compose.external_bootstrap(), "enable.idempotence": True})
    for i in range(30):
        producer.produce("compose-check", f"r{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    consumer = Consumer(
        {"bootstrap.servers": compose.external_bootstrap(), "group.id": "compose", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["compose-check"])
    seen = set()
    try:
        end = time.monotonic() + 60
        while len(seen) < 30 and time.monotonic() < end:
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                seen.add(message.value())
    finally:
        consumer.close()
    assert seen == {f"r{i}".encode() for i in range(30)}


def test_the_health_checks_answer(compose: ComposeOutsideDocker) -> None:
    image_check = exec_form(read_stages(ROOT / "Dockerfile")[-1].last("HEALTHCHECK").split("CMD", 1)[1])
    for broker in BROKERS:
        assert compose.healthcheck(broker, ["CMD", *image_check]) == 0, broker
    assert compose.healthcheck("etcd", SERVICES["etcd"]["healthcheck"]["test"]) == 0


def readme_cluster_commands() -> list[str]:
    """The commands of README's "same cluster without Docker" block, in order."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## Cluster\n") :]
    blocks = re.findall(r"```sh\n(.*?)```", section, re.S)
    block = next(b for b in blocks if "etcd --data-dir" in b)
    return [line.rstrip(" &") for line in block.strip().splitlines()]


def test_readme_s_cluster_commands_make_a_cluster(tmp_path: Path) -> None:
    commands = readme_cluster_commands()
    assert commands[0].startswith("etcd ") and len(commands) == 4
    ports: dict[str, str] = {}

    def local(line: str) -> list[str]:
        line = re.sub(r":(\d{4,5})\b", lambda m: ":" + ports.setdefault(m[1], str(free_port())), line)
        line = line.replace("/tmp/etcd-data", str(tmp_path / "etcd-data"))
        argv = line.split()
        if argv[0] == "oncelog":
            argv[0] = str(Path(sys.executable).parent / "oncelog")
            argv[argv.index("--data-dir") + 1] = str(tmp_path / argv[argv.index("--data-dir") + 1])
        return argv

    procs = []
    try:
        for line in commands:
            procs.append(
                subprocess.Popen(local(line), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=tmp_path)
            )
        brokers = ",".join(f"127.0.0.1:{ports[p]}" for p in ("19092", "29092", "39092"))
        admin = AdminClient({"bootstrap.servers": brokers})
        deadline = time.monotonic() + START_DEADLINE_S
        while True:
            try:
                metadata = admin.list_topics(timeout=5)
                if sorted(metadata.brokers) == [1, 2, 3] and metadata.controller_id in (1, 2, 3):
                    break
            except Exception:  # not up yet
                pass
            assert time.monotonic() < deadline, "README's cluster did not form"
            time.sleep(0.2)
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
