"""Bounce torture, after Kafka's ``transactions_test.py``: transactional copiers of confluent-kafka, kafka-python and
the bundled client copy input topics (replication factor 3, min.insync.replicas 2, seeded by an idempotent producer)
to output topics on three brokers and etcd while brokers are bounced in rolling order, hard (SIGKILL) and clean
(SIGTERM), and copiers are SIGKILLed, in a seeded random order; a read_committed consumer reads the outputs meanwhile
(``support/bounces.py``). Each output must equal its transformed input, once.

Not collected by pytest (CI runs the short form, ``tests/cluster/test_bounces.py``). Long form::

    .venv/bin/python tests/torture/bounce_torture.py --bounces 30 --records 20000 [--batch 500] [--seed N] \\
        [--clients confluent,kafka-python,oncelog] [--keep DIR] [--set transaction.marker.wait.ms=0 ...]

``--set`` adds broker settings (``transaction.marker.wait.ms=0``: Kafka's commit order).

Exit status 0 when every output is exactly its input and the reader saw nothing else, 1 otherwise.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make ``support`` importable

from support.bounces import run_bounces
from support.cluster import Cluster

SETTINGS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


def rolling_bounces(count: int, rng: random.Random) -> list[str]:
    """Brokers in rolling order (1, 2, 3, 1, ...), each bounce hard or clean at random, with a copier bounce
    between one in two."""
    bounces: list[str] = []
    for i in range(count):
        bounces.append(f"{rng.choice(['hard', 'clean'])}:{i % 3 + 1}")
        if rng.random() < 0.5:
            bounces.append("copier")
    return bounces


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bounces", type=int, default=30, help="broker bounces (copier bounces come on top)")
    parser.add_argument("--records", type=int, default=20000, help="input records per client")
    parser.add_argument("--batch", type=int, default=500, help="records per transaction at most")
    parser.add_argument("--clients", default="confluent,kafka-python,oncelog")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None, help="directory for the copiers' logs (kept)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a broker setting")
    args = parser.parse_args(argv)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bounce-torture-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        with Cluster(3, {**SETTINGS, **dict(s.split("=", 1) for s in args.set)}) as cluster:
            result = run_bounces(
                cluster,
                args.clients.split(","),
                records=args.records,
                bounces=rolling_bounces(args.bounces, random.Random(args.seed)),
                log_dir=work,
                batch=args.batch,
                seed=args.seed,
                log=lambda line: print(f"{time.monotonic() - started:7.1f}s {line}", flush=True),
            )
    problems = result.problems()
    print(f"{time.monotonic() - started:.0f}s: {result.summary()}")
    for problem in problems[:50]:
        print("PROBLEM", problem)
    print(f"{len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
