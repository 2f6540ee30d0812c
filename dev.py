#!/usr/bin/env python3
"""Developer entry point that needs only python3: it builds the environment itself, then runs the command.

    python3 dev.py broker [oncelog broker options]   start a broker (127.0.0.1:9092, data in ./oncelog-data)
    python3 dev.py test [pytest args]                install test tools (kcat, Node.js, a JDK and Maven via
                                                     apt-get when missing; kafkajs via npm; Apache Kafka's jars
                                                     via Maven), lint, test
    python3 dev.py sync [EXTRA ...]                  add extras of pyproject.toml (bench, spark, test) to .venv
    python3 dev.py uv [uv args]                      run the uv this file uses (e.g. uv build --wheel)

The environment is `.venv`, synced from `uv.lock` by uv (itself installed with pip into `.tools/` on first use); every
sync keeps the extras already installed.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent
TOOLS = ROOT / ".tools"
VENV = ROOT / ".venv"
#: The Node.js project of the kafkajs interop tests; its lock file pins kafkajs.
KAFKAJS = ROOT / "tests" / "interop" / "kafkajs"
MIN_PYTHON = (3, 11)
#: Source directories whose modules the test run compiles to bytecode first (``compile_sources``).
SOURCES = ("broker", "protocol", "client", "storage", "pipeline", "tests", "bench")


def run(cmd: list[str], cwd: Path = ROOT, **kwargs: object) -> None:
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True, cwd=cwd, **kwargs)  # type: ignore[call-overload]


def uv() -> str:
    """Path to a uv binary: on PATH, or installed into .tools/ with pip."""
    found = shutil.which("uv")
    if found:
        return found
    tool = TOOLS / "bin" / "uv"
    if not tool.exists():
        run([sys.executable, "-m", "venv", str(TOOLS)])
        run([str(TOOLS / "bin" / "python"), "-m", "pip", "install", "--quiet", "uv"])
    return str(tool)


def _normalized(name: str) -> str:
    """A distribution name as Python packaging compares them (PEP 503)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_extras() -> set[str]:
    """The extras of pyproject.toml whose every requirement is installed in .venv (by an earlier sync)."""
    installed = {_normalized(dist.name.split("-")[0]) for dist in VENV.glob("lib/python*/site-packages/*.dist-info")}
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    return {
        extra
        for extra, requirements in optional.items()
        if all(_normalized(re.match(r"[A-Za-z0-9._-]+", req)[0]) in installed for req in requirements)
    }


def sync(extras: list[str]) -> None:
    """Sync .venv to uv.lock with ``extras`` and every extra already installed, so one command never uninstalls
    what another installed."""
    env = dict(os.environ, UV_PYTHON_DOWNLOADS="never", UV_PYTHON=sys.executable)
    # Bytecode for what it installs: a process then loads it instead of compiling every module it imports again,
    # which Python does when PYTHONDONTWRITEBYTECODE is set (as on the CI machine).
    cmd = [uv(), "sync", "--frozen", "--quiet", "--compile-bytecode"]
    for extra in sorted(set(extras) | installed_extras()):
        cmd += ["--extra", extra]
    run(cmd, env=env)


def compile_sources() -> None:
    """Bytecode for oncelog's own modules, as ``sync`` makes it for the installed ones: each of the hundreds of
    broker, CLI and client processes the tests start imports the broker in 0.35 s of CPU instead of 0.8 s when
    PYTHONDONTWRITEBYTECODE is set (measured on the 2-core machine)."""
    run([str(VENV / "bin" / "python"), "-m", "compileall", "-q", "-j", "0", *SOURCES])


def ensure_system_packages() -> None:
    """kcat, Node.js (with npm), etcd (with etcdctl), a JDK and Maven are test-only system tools; install the missing
    ones from Debian's packages."""
    tools = (
        ("kcat", "kcat"),
        ("npm", "npm"),
        ("etcd", "etcd-server"),
        ("etcdctl", "etcd-client"),
        ("javac", "default-jdk-headless"),
        ("mvn", "maven"),
    )
    missing = [package for tool, package in tools if not shutil.which(tool)]
    if not missing:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    run([*sudo, "apt-get", "update", "-q"], env=env)
    run([*sudo, "apt-get", "install", "-y", "-q", *missing], env=env)


def ensure_node_packages() -> None:
    """Install the kafkajs interop tests' packages from their lock file, unless that lock is what is installed."""
    lock = (KAFKAJS / "package-lock.json").read_text()
    stamp = KAFKAJS / "node_modules" / ".installed-from-lock.json"
    if stamp.exists() and stamp.read_text() == lock:
        return
    run(["npm", "ci", "--no-audit", "--no-fund"], cwd=KAFKAJS)
    stamp.write_text(lock)


def ensure_java_packages() -> None:
    """Build the Java check programs and fetch Apache Kafka's jars at the version java/pom.xml pins, and Spark's Kafka
    connector (java/spark-kafka/pom.xml) (a no-op when nothing changed since the last build; see
    tests/support/kafka_jars.py)."""
    run([sys.executable, str(ROOT / "tests" / "support" / "kafka_jars.py")])


def main() -> int:
    if sys.version_info < MIN_PYTHON:
        print(f"oncelog needs Python >= {'.'.join(map(str, MIN_PYTHON))}", file=sys.stderr)
        return 2
    if len(sys.argv) < 2 or sys.argv[1] not in ("broker", "test", "sync", "uv"):
        print(__doc__, file=sys.stderr)
        return 2
    command, args = sys.argv[1], sys.argv[2:]
    if command == "sync":
        sync(args)
        return 0
    if command == "uv":
        env = dict(os.environ, UV_PYTHON_DOWNLOADS="never", UV_PYTHON=sys.executable)
        return subprocess.run([uv(), *args], cwd=ROOT, env=env).returncode
    if command == "broker":
        sync([])
        os.execv(str(VENV / "bin" / "oncelog"), ["oncelog", "broker", *args])
    ensure_system_packages()
    ensure_node_packages()
    ensure_java_packages()
    sync(["test"])
    compile_sources()
    run([str(VENV / "bin" / "ruff"), "check", "."])
    run([str(VENV / "bin" / "ruff"), "format", "--check", "."])
    run([str(VENV / "bin" / "lint-imports")])  # layering contracts: pyproject.toml [tool.importlinter]
    result = subprocess.run([str(VENV / "bin" / "pytest"), *args], cwd=ROOT)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
