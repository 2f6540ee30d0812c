"""Partition torture: the Jepsen-style workload of ``tests/cluster/test_partitions.py`` (an idempotent writer, a
transactional writer, a read_committed reader, stock confluent-kafka) on three brokers and etcd while, many times in
a seeded random order, one broker is cut off from the others and from etcd: the transactional id's coordinator, the
leader of a random partition, or a random broker; symmetrically or with its outbound connections left open (a zombie
that can still send requests). The history is then checked (``support/jepsen.check``).

Not collected by pytest (CI runs the short form). Long form::

    .venv/bin/python tests/torture/partition_torture.py --cuts 40 [--seed N] [--keep DIR]

Exit status 0 when the checker finds nothing, 1 otherwise (the anomalies are printed).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make ``support`` importable

from support.jepsen import PARTITIONS, Cut, check, run_with_cuts
from support.partitioned_cluster import PartitionedCluster


def random_cuts(count: int, rng: random.Random) -> list[Cut]:
    whom = ["coordinator", "leader", "1", "2", "3"]
    return [
        Cut(
            rng.choice(whom),
            outbound=rng.random() < 0.5,
            partition=rng.randrange(PARTITIONS),
            hold_s=rng.uniform(0.5, 6.0),
        )
        for _ in range(count)
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cuts", type=int, default=40)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None, help="directory to copy the brokers' logs to")
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    started = time.monotonic()
    cluster = PartitionedCluster(3)
    try:
        cluster.start()
        history = run_with_cuts(
            cluster,
            random_cuts(args.cuts, rng),
            rest_s=2.0,
            seed=args.seed,
            log=lambda line: print(f"{time.monotonic() - started:7.1f}s {line}", flush=True),
        )
    finally:
        if args.keep is not None:
            args.keep.mkdir(parents=True, exist_ok=True)
            for broker in cluster.brokers.values():
                shutil.copy(broker.stderr_path, args.keep / broker.stderr_path.name)
        cluster.close()
    problems = check(history)
    print(f"{time.monotonic() - started:.0f}s, {args.cuts} cuts: {history.summary()}")
    for problem in problems[:50]:
        print("ANOMALY", problem)
    print(f"{len(problems)} anomalies")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
