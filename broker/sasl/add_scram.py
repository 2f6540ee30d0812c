"""``oncelog add-scram``: give a data dir SCRAM users before the broker first starts (or while it is stopped).

The argument follows Kafka's ``kafka-storage format --add-scram`` syntax:
``SCRAM-SHA-256=[name=alice,password=alice-secret]``, with an optional ``iterations=N`` (default 4096, Kafka's
minimum; at most 16384). Only the salt, StoredKey and ServerKey are stored. A running broker keeps its own copy of
the credentials in memory: with the broker running, use AlterUserScramCredentials (any Kafka admin client) instead.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from oncelog.broker.sasl.credentials import ScramCredentialStore
from oncelog.protocol.sasl.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, ScramCredential

_SPEC = re.compile(r"(?P<mechanism>[A-Z0-9-]+)=\[(?P<fields>.*)\]", re.DOTALL)


@dataclass(frozen=True)
class ScramUserSpec:
    mechanism: str
    name: str
    password: str
    iterations: int = MIN_ITERATIONS

    def __repr__(self) -> str:
        return f"ScramUserSpec({self.mechanism!r}, {self.name!r}, iterations={self.iterations})"


def parse_spec(text: str) -> ScramUserSpec:
    """Parse one ``MECHANISM=[name=...,password=...[,iterations=N]]``; ValueError (without the password) if bad."""
    match = _SPEC.fullmatch(text.strip())
    if match is None:
        raise ValueError("expected MECHANISM=[name=NAME,password=PASSWORD[,iterations=N]]")
    mechanism = match["mechanism"]
    if mechanism not in MECHANISMS:
        raise ValueError(f"unsupported SCRAM mechanism {mechanism} (use {' or '.join(MECHANISMS)})")
    fields: dict[str, str] = {}
    for item in match["fields"].split(","):
        key, sep, value = item.partition("=")
        if not sep or key.strip() not in ("name", "password", "iterations"):
            raise ValueError(f"unknown or malformed field {key.strip()!r} (expected name, password, iterations)")
        fields[key.strip()] = value.strip().strip('"')
    if not fields.get("name") or not fields.get("password"):
        raise ValueError("both name and password are required")
    iterations = int(fields.get("iterations", MIN_ITERATIONS))
    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be between {MIN_ITERATIONS} and {MAX_ITERATIONS}")
    return ScramUserSpec(mechanism, fields["name"], fields["password"], iterations)


def add_scram_users(data_dir: Path, specs: list[ScramUserSpec]) -> None:
    """Add or replace each user's credential in ``data_dir`` (created if missing), durably."""
    data_dir.mkdir(parents=True, exist_ok=True)
    store = ScramCredentialStore(data_dir)
    store.load()
    for spec in specs:
        store.set(
            spec.name, spec.mechanism, ScramCredential.from_password(spec.mechanism, spec.password, spec.iterations)
        )
