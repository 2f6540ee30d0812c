"""Just enough of the Dockerfile and .dockerignore formats to run an image's build and start commands without Docker.

``read_stages(path)`` gives the instructions of each stage (continuation lines joined, comments dropped);
``exec_form`` parses a JSON-array argument (ENTRYPOINT, CMD, HEALTHCHECK CMD); ``build_context(root, patterns)``
lists the files ``docker build`` would send, with .dockerignore's patterns (``*``, ``**``, ``?``; ``!`` re-includes;
the last matching pattern decides, as Docker's).
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        """The arguments of every ``keyword`` instruction of this stage, in order."""
        return [i.args for i in self.instructions if i.keyword == keyword]

    def last(self, keyword: str) -> str:
        found = self.all(keyword)
        assert found, f"stage {self.name or self.base} has no {keyword}"
        return found[-1]


def read_stages(path: Path) -> list[Stage]:
    """The stages of a Dockerfile, each with its instructions."""
    stages: list[Stage] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        text, pending = pending + line, ""
        keyword, _, args = text.partition(" ")
        keyword = keyword.upper()
        if keyword == "FROM":
            base, _, name = (*args.split(maxsplit=2), "", "")[:3]
            stages.append(Stage(base, name.strip() or None))
        else:
            stages[-1].instructions.append(Instruction(keyword, args.strip()))
    return stages


def exec_form(args: str) -> list[str]:
    """The JSON array of an exec-form instruction."""
    value = json.loads(args)
    assert isinstance(value, list) and all(isinstance(v, str) for v in value), args
    return value


def read_ignore(path: Path) -> list[str]:
    """The patterns of a .dockerignore file (comments and blanks dropped)."""
    lines = path.read_text().splitlines() if path.exists() else []
    return [line.strip().rstrip("/") for line in lines if line.strip() and not line.strip().startswith("#")]


def _regex(pattern: str) -> str:
    """Docker's pattern syntax as a regular expression: ``*`` and ``?`` stay within a folder, ``**`` does not."""
    regex, i = "", 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            regex, i = regex + "(?:.*/)?", i + 3
        elif pattern.startswith("**", i):
            regex, i = regex + ".*", i + 2
        else:
            regex += {"*": "[^/]*", "?": "[^/]"}.get(pattern[i], re.escape(pattern[i]))
            i += 1
    return regex


def _matches(pattern: str, relative: str) -> bool:
    """Whether ``relative`` or a folder above it matches ``pattern``."""
    parts = relative.split("/")
    return any(re.fullmatch(_regex(pattern), "/".join(parts[:n])) for n in range(1, len(parts) + 1))


def ignored(relative: str, patterns: list[str]) -> bool:
    """Whether .dockerignore's ``patterns`` keep ``relative`` (a path with / separators) out of the context."""
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        if _matches(pattern.lstrip("!"), relative):
            result = not negate
    return result


def build_context(root: Path, patterns: list[str]) -> list[str]:
    """The files under ``root`` that ``docker build root`` sends, relative and sorted (folders that are ignored are
    not entered: the patterns here re-include nothing)."""
    assert not any(p.startswith("!") for p in patterns), "re-includes are not modelled"
    found: list[str] = []
    for folder, dirs, files in os.walk(root):
        base = Path(folder).relative_to(root).as_posix()
        prefix = "" if base == "." else base + "/"
        dirs[:] = [d for d in dirs if not ignored(prefix + d, patterns)]
        found += [prefix + f for f in files if not ignored(prefix + f, patterns)]
    return sorted(found)
