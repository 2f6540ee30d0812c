"""Interop: kcat (Debian's, librdkafka 2.0.2) against the broker under test.

kcat has no admin commands, so topics come from the broker's auto-creation on Metadata.
Records are text (kcat's line-oriented -P/-C), headers apply to a whole -P invocation.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from support.dataset import CODECS, java_partition

N_RECORDS = 10_000
DEADLINE_S = 40.0
HEADERS = (("trace", "t-1"), ("kind", "interop"), ("trace", "t-2"))
ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.,;!?/ ="


def kcat(*args: str, stdin: bytes | Path | None = None) -> bytes:
    """Run kcat with a deadline; raise with its stderr on a non-zero exit."""
    exe = shutil.which("kcat") or shutil.which("kafkacat")
    assert exe, "kcat is not installed (apt-get install -y kcat)"
    if isinstance(stdin, Path):
        # A file named on the command line would become ONE message; fed as stdin it is split into lines.
        with stdin.open("rb") as f:
            proc = subprocess.run([exe, *args], stdin=f, capture_output=True, timeout=DEADLINE_S, check=False)
    else:
        proc = subprocess.run([exe, *args], input=stdin, capture_output=True, timeout=DEADLINE_S, check=False)
    if proc.returncode != 0:
        raise AssertionError(f"kcat {' '.join(args)} exited {proc.returncode}:\n{proc.stderr.decode()[-3000:]}")
    return proc.stdout


def metadata(bootstrap: str, topic: str) -> dict:
    end = time.monotonic() + DEADLINE_S
    while True:
        md = json.loads(kcat("-b", bootstrap, "-L", "-J", "-t", topic))
        topics = [t for t in md["topics"] if t["topic"] == topic]
        if topics and not topics[0].get("error") and topics[0]["partitions"]:
            return md | {"topic": topics[0]}
        assert time.monotonic() < end, f"topic {topic} not in metadata: {md}"
        time.sleep(0.2)


def make_lines(n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        key = f"k{rng.randrange(300)}" if i % 3 else "".join(rng.choices(ALPHABET[:62], k=rng.randrange(1, 20)))
        value = "".join(rng.choices(ALPHABET, k=rng.randrange(1, 200)))
        out.append((key, value))
    return out


@pytest.mark.parametrize("codec", CODECS)
def test_produce_consume_every_field(bootstrap: str, tmp_path: Path, codec: str) -> None:
    from conftest import unique_topic

    topic = unique_topic(f"kc-{codec}")
    lines = make_lines(N_RECORDS, seed=300 + CODECS.index(codec))
    src = tmp_path / "in.txt"
    src.write_text("".join(f"{k}:{v}\n" for k, v in lines))
    header_args = [a for name, val in HEADERS for a in ("-H", f"{name}={val}")]
    t0 = int(time.time() * 1000)
    kcat(
        "-b", bootstrap, "-P", "-t", topic, "-K", ":", "-z", codec, *header_args,
        "-X", "partitioner=murmur2_random", "-X", "acks=all", "-X", "linger.ms=5",
        stdin=src,
    )  # fmt: skip
    t1 = int(time.time() * 1000)

    md = metadata(bootstrap, topic)
    nparts = len(md["topic"]["partitions"])
    out = kcat(
        "-b", bootstrap, "-C", "-t", topic, "-e", "-o", "beginning", "-q",
        "-f", "%p\\t%o\\t%T\\t%k\\t%s\\t%h\\n",
    )  # fmt: skip
    rows = out.decode().split("\n")
    assert rows[-1] == ""
    rows = rows[:-1]
    assert len(rows) == N_RECORDS, f"consumed {len(rows)} of {N_RECORDS}"

    want_headers = ",".join(f"{n}={v}" for n, v in HEADERS)
    per_partition: dict[int, list[tuple[int, str, str]]] = {}
    for row in rows:
        p, o, ts, key, value, headers = row.split("\t")
        assert headers == want_headers
        assert t0 - 1000 <= int(ts) <= t1 + 1000, f"timestamp {ts} outside [{t0}, {t1}]"
        per_partition.setdefault(int(p), []).append((int(o), key, value))

    # Each partition holds the lines for its murmur2 partition, in file order, at offsets 0..n-1.
    for p in range(nparts):
        want = [(k, v) for k, v in lines if java_partition(k.encode(), nparts) == p]
        got = per_partition.get(p, [])
        assert [o for o, _, _ in got] == list(range(len(want))), f"partition {p} offsets not contiguous"
        assert [(k, v) for _, k, v in got] == want, f"partition {p} contents differ"


def test_metadata_listing(bootstrap: str) -> None:
    from conftest import unique_topic

    topic = unique_topic("kc-meta")
    kcat("-b", bootstrap, "-P", "-t", topic, stdin=b"hello\n")
    md = metadata(bootstrap, topic)
    brokers = md["brokers"]
    assert len(brokers) == 1
    assert brokers[0]["id"] == 1
    host, _, port = bootstrap.rpartition(":")
    assert brokers[0]["name"] == f"{host}:{port}"
    parts = md["topic"]["partitions"]
    assert all(p["leader"] == 1 for p in parts)
    text = kcat("-b", bootstrap, "-L", "-t", topic).decode()
    assert f'topic "{topic}" with {len(parts)} partitions' in text
