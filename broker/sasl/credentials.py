"""SCRAM credentials, durable in the data dir, and KIP-554's rules for changing and describing them.

``scram-credentials.json`` holds, per user and mechanism, the salt, StoredKey, ServerKey and iteration count (RFC
5802 section 3): never a password nor a salted password. Every change is written to a new file, fsynced and renamed
over the old one (the directory fsynced too) before it is applied in memory or acknowledged, so a credential
AlterUserScramCredentials answered survives kill -9, and a failed write changes nothing.

AlterUserScramCredentials follows Kafka's ScramControlManager: a user named twice in one request gets
DUPLICATE_RESOURCE (all its alterations dropped); an empty name, or too few / too many iterations, gets
UNACCEPTABLE_CREDENTIAL; an unknown mechanism UNSUPPORTED_SASL_MECHANISM; deleting a credential that does not exist
RESOURCE_NOT_FOUND. DescribeUserScramCredentials follows Kafka's ScramImage.describe.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from oncelog.protocol import ErrorCode
from oncelog.protocol.sasl.scram import (
    MAX_ITERATIONS,
    MECHANISM_BY_TYPE,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
)
from oncelog.storage.checkpoint import atomic_write

FILE_NAME = "scram-credentials.json"
_FILE_VERSION = 1
_DUPLICATE_ALTER = "A user credential cannot be altered twice in the same request"
_DUPLICATE_DESCRIBE = "Cannot describe SCRAM credentials for the same user twice in a single request: "
_MISSING_DESCRIBE = "Attempt to describe a user credential that does not exist: "


@dataclass(frozen=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True)
class Upsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:
        return f"Upsertion({self.name!r}, mechanism={self.mechanism}, iterations={self.iterations})"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class ScramCredentialStore:
    """user -> mechanism name -> ScramCredential, loaded from and saved to the data dir."""

    def __init__(self, data_dir: Path) -> None:
        self._path = Path(data_dir) / FILE_NAME
        self._credentials: dict[str, dict[str, ScramCredential]] = {}

    def load(self) -> None:
        if self._path.exists():
            self._credentials = decode_credentials(self._path.read_bytes())

    def _save(self, credentials: dict[str, dict[str, ScramCredential]]) -> None:
        atomic_write(self._path, encode_credentials(credentials))

    def replace(self, payload: bytes) -> None:
        """Take every credential from ``payload`` (``encode_credentials``: a cluster's, from etcd), kept in the data
        dir too."""
        credentials = decode_credentials(payload)
        if credentials != self._credentials:
            self._save(credentials)
            self._credentials = credentials

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get(user, {}).get(mechanism)

    def set(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        """Add or replace one credential (durable when this returns); the operator's offline path."""
        updated = {u: dict(m) for u, m in self._credentials.items()}
        updated.setdefault(user, {})[mechanism] = credential
        self._save(updated)
        self._credentials = updated

    def alter(self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]) -> list[dict]:
        """Apply a KIP-554 request; returns its per-user results. Durable before it returns; raises OSError (nothing
        changed) when the file cannot be written."""
        updated, results = self.plan(deletions, upsertions)
        if updated is not None:
            self._save(updated)
            self._credentials = updated
        return results

    def plan(
        self, deletions: Sequence[Deletion], upsertions: Sequence[Upsertion]
    ) -> tuple[dict[str, dict[str, ScramCredential]] | None, list[dict]]:
        """What a KIP-554 request would make of the credentials (None: no change) and its per-user results; nothing
        is changed (a cluster stores the outcome in etcd first: ``encode_credentials``)."""
        errors: dict[str, tuple[int, str]] = {}
        to_delete: dict[str, Deletion] = {}
        to_upsert: dict[str, Upsertion] = {}
        for deletion in deletions:
            if deletion.name in errors:
                continue
            if to_delete.pop(deletion.name, None) is not None:
                errors[deletion.name] = (ErrorCode.DUPLICATE_RESOURCE, _DUPLICATE_ALTER)
                continue
            problem = _name_and_mechanism_problem(deletion.name, deletion.mechanism)
            if problem is None and self.get(deletion.name, MECHANISM_BY_TYPE[deletion.mechanism]) is None:
                problem = (ErrorCode.RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")
            if problem is not None:
                errors[deletion.name] = problem
            else:
                to_delete[deletion.name] = deletion
        for upsertion in upsertions:
            if upsertion.name in errors:
                continue
            if to_delete.pop(upsertion.name, None) is not None or to_upsert.pop(upsertion.name, None) is not None:
                errors[upsertion.name] = (ErrorCode.DUPLICATE_RESOURCE, _DUPLICATE_ALTER)
                continue
            problem = _name_and_mechanism_problem(upsertion.name, upsertion.mechanism)
            if problem is None and upsertion.iterations < MIN_ITERATIONS:
                problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
            elif problem is None and upsertion.iterations > MAX_ITERATIONS:
                problem = (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
            if problem is not None:
                errors[upsertion.name] = problem
            else:
                to_upsert[upsertion.name] = upsertion
        updated = {u: dict(m) for u, m in self._credentials.items()}
        for deletion in to_delete.values():
            mechanisms = updated[deletion.name]
            del mechanisms[MECHANISM_BY_TYPE[deletion.mechanism]]
            if not mechanisms:
                del updated[deletion.name]
        for upsertion in to_upsert.values():
            mechanism = MECHANISM_BY_TYPE[upsertion.mechanism]
            updated.setdefault(upsertion.name, {})[mechanism] = ScramCredential.from_salted_password(
                mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
            )
        results = [_result(name, ErrorCode.NONE, None) for name in (*to_delete, *to_upsert)]
        results += [_result(name, code, message) for name, (code, message) in errors.items()]
        return (updated if to_delete or to_upsert else None), results

    def describe(self, users: Iterable[str] | None) -> list[dict]:
        """Per-user results of DescribeUserScramCredentials; ``users`` None or empty: every user."""
        requested = list(users or [])
        if not requested:
            requested = sorted(self._credentials)
        seen: dict[str, bool] = {}
        for user in requested:
            seen[user] = user in seen
        results = []
        for user, duplicate in seen.items():
            if duplicate:
                results.append(
                    {**_result(user, ErrorCode.DUPLICATE_RESOURCE, _DUPLICATE_DESCRIBE + user), "credential_infos": []}
                )
                continue
            mechanisms = self._credentials.get(user, {})
            if not mechanisms:
                results.append(
                    {**_result(user, ErrorCode.RESOURCE_NOT_FOUND, _MISSING_DESCRIBE + user), "credential_infos": []}
                )
                continue
            infos = [
                {"mechanism": MECHANISMS[name][1], "iterations": credential.iterations}
                for name, credential in sorted(mechanisms.items(), key=lambda item: MECHANISMS[item[0]][1])
            ]
            results.append({**_result(user, ErrorCode.NONE, None), "credential_infos": infos})
        return results


def encode_credentials(credentials: dict[str, dict[str, ScramCredential]]) -> bytes:
    """The credentials as stored (the data dir's file, a cluster's etcd key): JSON, salts and keys in base64."""
    payload = {
        "version": _FILE_VERSION,
        "users": {
            user: {
                mechanism: {
                    "salt": _b64(c.salt),
                    "stored_key": _b64(c.stored_key),
                    "server_key": _b64(c.server_key),
                    "iterations": c.iterations,
                }
                for mechanism, c in sorted(mechanisms.items())
            }
            for user, mechanisms in sorted(credentials.items())
        },
    }
    return json.dumps(payload, indent=1).encode()


def decode_credentials(data: bytes) -> dict[str, dict[str, ScramCredential]]:
    raw = json.loads(data)
    return {
        user: {
            mechanism: ScramCredential(
                base64.b64decode(entry["salt"]),
                base64.b64decode(entry["stored_key"]),
                base64.b64decode(entry["server_key"]),
                int(entry["iterations"]),
            )
            for mechanism, entry in mechanisms.items()
        }
        for user, mechanisms in raw["users"].items()
    }


def _result(user: str, code: int, message: str | None) -> dict:
    return {"user": user, "error_code": code, "error_message": message}


def _name_and_mechanism_problem(name: str, mechanism: int) -> tuple[int, str] | None:
    if not name:
        return ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"
    if mechanism not in MECHANISM_BY_TYPE:
        return ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"
    return None
