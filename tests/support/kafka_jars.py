"""Apache Kafka's own jars (broker, tools, Java clients) at the version ``java/pom.xml`` pins, fetched with Maven.

``ensure()`` runs ``mvn package`` over ``java/pom.xml``: it compiles the Java check programs of ``java/src`` into
``java/target/classes`` and copies every runtime jar into ``java/target/lib`` (ignored by git; nothing fetched is
committed). A stamp records the pom and sources it was built from, so a second call costs one file comparison.
Needs only the standard library: ``dev.py test`` runs this file as a script before pytest, ``bench/run.py`` and the
fixtures call ``ensure()`` when the jars are missing.
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


class JavaUnavailable(RuntimeError):
    """No ``java`` / ``mvn`` on PATH, or the Maven build failed (the message holds its output tail)."""


def _inputs_digest() -> str:
    """A digest of everything the build depends on: the pom and every Java source file."""
    digest = hashlib.sha256()
    for path in [PROJECT / "pom.xml", *sorted((PROJECT / "src").rglob("*.java"))]:
        digest.update(str(path.relative_to(PROJECT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def ensure() -> Path:
    """Build and fetch when the pom or a source changed since the last build; return the jar folder ``LIB``."""
    wanted = _inputs_digest()
    if STAMP.exists() and STAMP.read_text() == wanted and LIB.is_dir() and CLASSES.is_dir():
        return LIB
    mvn = shutil.which("mvn")
    if mvn is None or shutil.which("java") is None:
        raise JavaUnavailable("java and mvn are needed on PATH (Debian: default-jdk-headless, maven)")
    shutil.rmtree(LIB, ignore_errors=True)  # a jar of an older pin must not stay on the classpath
    result = subprocess.run(
        [mvn, "--batch-mode", "--quiet", "package"], cwd=PROJECT, capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise JavaUnavailable(f"mvn package failed:\n{(result.stdout + result.stderr)[-4000:]}")
    STAMP.write_text(wanted)
    return LIB


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
    except JavaUnavailable as error:
        print(error, file=sys.stderr)
        sys.exit(1)
