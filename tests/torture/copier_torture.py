"""Copier torture: the exactly-once consume-transform-produce copier (``tests/support/copier.py``, a consumer group
member with a transactional producer on a stock client) copies an input topic while the copier and the broker are
SIGKILLed many times in a seeded random order; the output must then be exactly the transformed input (every input
record once, nothing else, nothing from an aborted transaction visible to read_committed).

Not collected by pytest (CI runs the short form, ``tests/interop/test_copier.py``). Long form::

    .venv/bin/python tests/torture/copier_torture.py --copier-kills 20 --broker-kills 5 --records 10000 \\
        --client confluent          # or kafka-python; --seed N, --batch N, --keep DIR to keep logs and data

``--set KEY=VALUE`` adds a broker setting (``transaction.marker.wait.ms=0``: Kafka's commit order).

Exit status 0 when the output is exactly once, 1 otherwise (the differences are printed).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script: make ``support`` importable

from support.broker import BrokerProcess
from support.copier import COPIERS
from support.copier_harness import exactly_once_problems, run_chaos

#: Broker settings of the torture broker (as the interop tests: no initial rebalance delay, short sessions allowed).
BROKER_SETTINGS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", choices=sorted(COPIERS), default="confluent")
    parser.add_argument("--copier-kills", type=int, default=20)
    parser.add_argument("--broker-kills", type=int, default=5)
    parser.add_argument("--records", type=int, default=10000)
    parser.add_argument("--batch", type=int, default=100, help="records per transaction at most")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None, help="directory for data and logs (kept afterwards)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a broker setting")
    args = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="copier-torture-") as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        settings = {**BROKER_SETTINGS, **dict(s.split("=", 1) for s in args.set)}
        broker = BrokerProcess(work / "data", settings=settings)
        try:
            broker.start()
            result = run_chaos(
                broker,
                args.client,
                work,
                records=args.records,
                copier_kills=args.copier_kills,
                broker_kills=args.broker_kills,
                batch=args.batch,
                seed=args.seed,
            )
        finally:
            broker.close()
        problems = exactly_once_problems(result)
        print(
            f"{args.client}: {result.records} records, {result.copier_kills} copier kills, {result.broker_kills} "
            f"broker kills, {result.copier_starts} copier starts, other copier exits {result.unexpected_exits}, "
            f"{len(result.output_rows)} output records ({result.aborted_records} more aborted), {result.seconds:.1f}s"
        )
        for problem in problems:
            print("PROBLEM:", problem)
        if problems and args.keep is None:
            print("(rerun with --keep DIR to keep the logs)")
        return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
