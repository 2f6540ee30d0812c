"""Apache Kafka's own jars (broker, tools, Java clients) at the version ``java/pom.xml`` pins, fetched with Maven.

``ensure()`` runs ``mvn package`` over ``java/pom.xml``: it compiles the Java check programs of ``java/src`` into
``java/target/classes`` and copies every runtime jar into ``java/target/lib`` (ignored by git; nothing fetched is
committed). A stamp records the pom and sources it was built from, so a second call costs one file comparison.
Needs only the standard library: ``dev.py test`` runs this file as a script before pytest, ``bench/run.py`` and the
fixtures call ``ensure()`` when the jars are missing.

``ensure_spark_kafka()`` does the same for Spark's Kafka connector over ``java/spark-kafka/pom.xml`` (a separate pom:
its kafka-clients is the one Spark builds against, not Kafka's own), copying its jars into ``java/target/spark-kafka``.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ROOT / "java"
TARGET = PROJECT / "target"
LIB = TARGET / "lib"
CLASSES = TARGET / "classes"
STAMP = TARGET / ".built-from"
SPARK_KAFKA_PROJECT = PROJECT / "spark-kafka"
SPARK_KAFKA_LIB = TARGET / "spark-kafka"
SPARK_KAFKA_STAMP = TARGET / ".spark-kafka-built-from"


class JavaUnavailable(RuntimeError):
    """No ``java`` / ``mvn`` on PATH, or the Maven build failed (the message holds its output tail)."""


def _digest(project: Path, paths: list[Path]) -> str:
    """A digest of everything a build depends on: its pom and source files."""
    digest = hashlib.sha256()
    for path in paths:
        digest.update(str(path.relative_to(project)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def _mvn_package(project: Path, stamp: Path, wanted: str, outputs: list[Path]) -> None:
    """``mvn package`` over ``project`` unless ``stamp`` says it was built from ``wanted`` and ``outputs`` exist."""
    if stamp.exists() and stamp.read_text() == wanted and all(path.is_dir() for path in outputs):
        return
    mvn = shutil.which("mvn")
    if mvn is None or shutil.which("java") is None:
        raise JavaUnavailable("java and mvn are needed on PATH (Debian: default-jdk-headless, maven)")
    for path in outputs:
        shutil.rmtree(path, ignore_errors=True)  # a jar of an older pin must not stay on the classpath
    result = subprocess.run(
        [mvn, "--batch-mode", "--quiet", "package"], cwd=project, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise JavaUnavailable(f"mvn package failed in {project}:\n{(result.stdout + result.stderr)[-4000:]}")
    TARGET.mkdir(exist_ok=True)
    stamp.write_text(wanted)


def ensure() -> Path:
    """Build and fetch when the pom or a source changed since the last build; return the jar folder ``LIB``."""
    sources = [PROJECT / "pom.xml", *sorted((PROJECT / "src").rglob("*.java"))]
    _mvn_package(PROJECT, STAMP, _digest(PROJECT, sources), [LIB, CLASSES])
    return LIB


def ensure_spark_kafka() -> list[Path]:
    """Fetch Spark's Kafka connector when its pom changed since the last fetch; return its jars (for ``spark.jars``)."""
    pom = SPARK_KAFKA_PROJECT / "pom.xml"
    _mvn_package(SPARK_KAFKA_PROJECT, SPARK_KAFKA_STAMP, _digest(SPARK_KAFKA_PROJECT, [pom]), [SPARK_KAFKA_LIB])
    return sorted(SPARK_KAFKA_LIB.glob("*.jar"))


def classpath() -> str:
    """The Java classpath of the fetched jars plus the compiled check programs (``ensure()`` first)."""
    lib = ensure()
    return f"{CLASSES}:{lib}/*"


def kafka_version() -> str:
    """The Kafka version ``java/pom.xml`` pins (its ``kafka.version`` property)."""
    found = re.search(r"<kafka\.version>([^<]+)</kafka\.version>", (PROJECT / "pom.xml").read_text())
    assert found is not None, "java/pom.xml has no kafka.version property"
    return found.group(1)


def java() -> str:
    """The ``java`` launcher on PATH."""
    found = shutil.which("java")
    if found is None:
        raise JavaUnavailable("java is needed on PATH")
    return found


if __name__ == "__main__":
    print(f"+ mvn package over {PROJECT / 'pom.xml'} (when changed)", flush=True)
    try:
        print(ensure())
        print(f"+ mvn package over {SPARK_KAFKA_PROJECT / 'pom.xml'} (when changed)", flush=True)
        print(ensure_spark_kafka()[0].parent)
    except JavaUnavailable as error:
        print(error, file=sys.stderr)
        sys.exit(1)
