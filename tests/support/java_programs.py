"""Running Java programs on the classpath of Apache Kafka's fetched jars (``support.kafka_jars``): the Java check
programs of ``java/src`` and Kafka's command-line tools by main class (the ``bin/*.sh`` scripts are not in the Maven
artifacts; each script only runs ``java -cp ... <main class>``).

Guaranteed: every call waits for the JVM to exit within its deadline (killed after it) and returns its exit code,
stdout and stderr; the SLF4J logging of clients and tools goes to stderr at WARN, so stdout is the program's own.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
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


#: One tool's run inside a ToolBatch: its exit code (from ``Exit.exit``, 0 when it returned), stdout and stderr.
ToolRun = JavaRun


def run_java(main_class: str, args: Sequence[str], *, stdin: str | None = None, timeout: float = DEADLINE_S) -> JavaRun:
    """Run ``main_class`` with ``args`` on the fetched classpath (building it first when missing)."""
    command = [kafka_jars.java(), *JVM_OPTIONS, "-cp", kafka_jars.classpath(), main_class, *args]
    proc = subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout, check=False)
    return JavaRun(proc.returncode, proc.stdout, proc.stderr)


def run_tools(commands: Sequence[tuple[str, str, Sequence[str]]], *, timeout: float = DEADLINE_S) -> dict[str, ToolRun]:
    """Run Kafka's tools in one JVM (``ToolBatch``): each command is ``(label, main class, args)``, an argument
    ``stdin=TEXT`` being the tool's standard input. Returns each label's exit code, stdout and stderr."""
    lines = []
    for label, main_class, args in commands:
        fields = [label, main_class, *args]
        assert all("\t" not in field and "\n" not in field for field in fields), fields
        lines.append("\t".join(fields))
    with tempfile.NamedTemporaryFile("w", suffix=".tools", encoding="utf-8") as batch:
        batch.write("\n".join(lines) + "\n")
        batch.flush()
        run = run_java("oncelog.javacheck.ToolBatch", [batch.name], timeout=timeout)
    if run.returncode != 0 or not run.stdout.rstrip().endswith("#### end"):
        raise AssertionError(f"ToolBatch exited {run.returncode}:\n{run.stdout[-6000:]}\n{run.stderr[-6000:]}")
    return parse_tool_output(run.stdout)


def parse_tool_output(stdout: str) -> dict[str, ToolRun]:
    """Split ToolBatch's output into each label's ``ToolRun``."""
    runs: dict[str, ToolRun] = {}
    sections = re.split(r"^#### (\S+) (exit=-?\d+|stderr|end)\n?", stdout, flags=re.MULTILINE)
    # sections: [before, label, kind, text, label, kind, text, ...]
    pending: dict[str, tuple[int, str]] = {}
    for label, kind, text in zip(sections[1::3], sections[2::3], sections[3::3], strict=True):
        if kind.startswith("exit="):
            pending[label] = (int(kind.removeprefix("exit=")), text)
        elif kind == "stderr":
            code, out = pending.pop(label)
            runs[label] = ToolRun(code, out, text)
    return runs
