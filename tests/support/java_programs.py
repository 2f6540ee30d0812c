"""Running Java programs on the classpath of Apache Kafka's fetched jars (``support.kafka_jars``): the Java check
programs of ``java/src`` and Kafka's command-line tools by main class (the ``bin/*.sh`` scripts are not in the Maven
artifacts; each script only runs ``java -cp ... <main class>``).

Guaranteed: every call waits for the JVM to exit within its deadline (killed after it) and returns its exit code,
stdout and stderr; the SLF4J logging of clients and tools goes to stderr at WARN, so stdout is the program's own.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from . import kafka_jars

DEADLINE_S = 180.0
#: JVM options of every run: a small heap and a fast start (no JIT tiers beyond C1; these runs are short).
JVM_OPTIONS = (
    "-Xmx256m",
    "-XX:TieredStopAtLevel=1",
    "-XX:+UseSerialGC",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.logFile=System.err",
)


@dataclass(frozen=True)
class JavaRun:
    """What one JVM run printed and returned."""

    returncode: int
    stdout: str
    stderr: str


def run_java(main_class: str, args: Sequence[str], *, stdin: str | None = None, timeout: float = DEADLINE_S) -> JavaRun:
    """Run ``main_class`` with ``args`` on the fetched classpath (building it first when missing)."""
    command = [kafka_jars.java(), *JVM_OPTIONS, "-cp", kafka_jars.classpath(), main_class, *args]
    proc = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    return JavaRun(proc.returncode, proc.stdout, proc.stderr)
