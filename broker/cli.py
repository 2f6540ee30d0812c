"""The ``oncelog`` command: ``oncelog broker`` runs a single-node broker until SIGTERM/SIGINT; ``oncelog add-scram``
adds SCRAM users to a data dir offline; ``oncelog delay-service`` runs a DelayService on its own; the other commands
(``topic``, ``produce``, ``consume``, ``txn``, ``group``, ``copy``) are the bundled client's tools."""

from __future__ import annotations

import argparse
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import structlog
import trio
from oncelog.broker import fd_budget
from oncelog.broker.allocator import fix_malloc_thresholds
from oncelog.broker.collector import settle_collector
from oncelog.broker.config import BrokerConfig, ConfigError, parse_overrides, read_properties_file
from oncelog.broker.delay.buffer import DELAY_MAX_BUFFERED_RECORDS
from oncelog.broker.delay.service import DelayService
from oncelog.broker.sasl.add_scram import add_scram_users, parse_spec
from oncelog.broker.startup import StartupError
from oncelog.client.delay import DEFAULT_DELAY_LEVELS, parse_levels

if TYPE_CHECKING:
    from oncelog.broker.node import BrokerNode

DEFAULT_LISTEN = "127.0.0.1:9092"
DEFAULT_DATA_DIR = "./oncelog-data"
#: ``oncelog broker``'s exit codes (README, "Exit codes"): stopped by SIGTERM/SIGINT; a configuration or usage error
#: (argparse's code too); could not start (a listener cannot bind, the data dir is unusable, full or locked, or the
#: process has too few file descriptors to open its logs: one line on stderr names the cause).
EXIT_OK = 0
EXIT_CONFIG_ERROR = 2
EXIT_STARTUP_FAILED = 3


def configure_logging(level: str) -> None:
    """structlog to stderr: one line per event, key=value pairs."""
    logging.basicConfig(format="%(message)s", stream=sys.stderr, level=level.upper())
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.dev.ConsoleRenderer(colors=False),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(sys.stderr),
        cache_logger_on_first_use=True,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="oncelog", description="A Kafka-compatible transactional broker.")
    commands = parser.add_subparsers(dest="command", required=True)
    broker = commands.add_parser(
        "broker", help="run a broker: a single node, or a cluster member with --set etcd.connect=HOST:PORT[/ROOT]"
    )
    broker.add_argument("--data-dir", default=None, help=f"partition logs live here (default {DEFAULT_DATA_DIR})")
    broker.add_argument(
        "--listen",
        default=None,
        help=f"listeners: [NAME://]HOST:PORT[,...] (default {DEFAULT_LISTEN}; no NAME:// means PLAINTEXT)",
    )
    broker.add_argument(
        "--advertise", default=None, help="advertised.listeners: [NAME://]HOST:PORT[,...] (default: the listeners)"
    )
    broker.add_argument("--node-id", type=int, default=None, help="broker id (node.id, default 1)")
    broker.add_argument("--config", type=Path, default=None, help="Kafka-style properties file")
    broker.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="override a property (repeatable)"
    )
    broker.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    add_scram = commands.add_parser("add-scram", help="add SCRAM users to a data dir (broker stopped)")
    add_scram.add_argument("--data-dir", default=DEFAULT_DATA_DIR, help=f"the broker's data dir ({DEFAULT_DATA_DIR})")
    add_scram.add_argument(
        "specs", nargs="+", metavar="SPEC", help="MECHANISM=[name=NAME,password=PASSWORD[,iterations=N]]"
    )
    delay = commands.add_parser(
        "delay-service", help="run a DelayService as its own process (set delay.service.enable=false on the brokers)"
    )
    delay.add_argument("-b", "--bootstrap-server", required=True, help="HOST:PORT of a broker")
    delay.add_argument("--levels", default=DEFAULT_DELAY_LEVELS, help="the brokers' delay.levels")
    delay.add_argument(
        "--transactional-id", default="__oncelog-delay-external", help="one per running service (fences a twin)"
    )
    delay.add_argument("--max-buffered-records", type=int, default=DELAY_MAX_BUFFERED_RECORDS)
    delay.add_argument("--dead-letter-topic", default=None, help="for records that cannot be delivered")
    delay.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    from oncelog.client.cli import add_subcommands

    add_subcommands(commands)
    return parser


def resolve_config(args: argparse.Namespace) -> BrokerConfig:
    """File, then --set, then the dedicated flags (which win)."""
    file_values = read_properties_file(args.config) if args.config else {}
    flags: dict[str, str] = {}
    if args.data_dir is not None:
        flags["log.dirs"] = args.data_dir
    if args.node_id is not None:
        flags["node.id"] = str(args.node_id)
    if args.listen is not None:
        flags["listeners"] = args.listen
    if args.advertise is not None:
        flags["advertised.listeners"] = args.advertise
    return BrokerConfig.from_sources(file_values, parse_overrides(args.set), flags)


async def run_broker(node: BrokerNode) -> None:
    """Run ``node`` until SIGTERM or SIGINT, then shut it down cleanly."""
    fix_malloc_thresholds()
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            settle_collector()

            async for signum in signals:
                structlog.get_logger(__name__).info("shutdown", signal=signal.Signals(signum).name)
                await node.hand_over()
                nursery.cancel_scope.cancel()
                break


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "add-scram":
        try:
            add_scram_users(Path(args.data_dir), [parse_spec(spec) for spec in args.specs])
        except (ValueError, OSError) as exc:
            print(f"oncelog add-scram: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.command == "delay-service":
        return run_delay_service(args)
    if args.command != "broker":
        from oncelog.client.cli import run

        return run(args)
    configure_logging(args.log_level)
    from oncelog.broker.node import BrokerNode  # here: the other commands (delay-service) start faster without it

    try:
        config = resolve_config(args)
        node = BrokerNode(config)
    except (ConfigError, ValueError, OSError) as exc:
        print(f"oncelog: {exc}", file=sys.stderr)
        return EXIT_CONFIG_ERROR
    if config.not_used:
        structlog.get_logger(__name__).warning("not used by oncelog", properties=config.not_used_summary())
    raised = fd_budget.raise_soft_limit()
    if raised is not None:
        structlog.get_logger(__name__).info("fd_limit_raised", rlimit_nofile_soft=raised[1], was=raised[0])
    try:
        trio.run(run_broker, node)
    except BaseException as exc:
        cause = startup_error(exc)
        if cause is None:
            raise
        print(f"oncelog: {cause}", file=sys.stderr)
        return EXIT_STARTUP_FAILED
    return EXIT_OK


def run_delay_service(args: argparse.Namespace) -> int:
    """``oncelog delay-service``: forward delayed records until SIGTERM/SIGINT."""
    configure_logging(args.log_level)
    try:
        service = DelayService(
            args.bootstrap_server,
            parse_levels(args.levels),
            transactional_id=args.transactional_id,
            max_buffered_records=args.max_buffered_records,
            dead_letter_topic=args.dead_letter_topic,
        )
    except ValueError as exc:
        print(f"oncelog delay-service: {exc}", file=sys.stderr)
        return EXIT_CONFIG_ERROR

    async def serve() -> None:
        with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(service.run)
                async for _ in signals:
                    nursery.cancel_scope.cancel()
                    break

    trio.run(serve)
    return EXIT_OK


def startup_error(exc: BaseException) -> Exception | None:
    """The reason the broker could not start that ``exc`` is or holds (trio wraps a task's error in exception
    groups): a StartupError or a file-descriptor limit; None for anything else."""
    if isinstance(exc, StartupError | fd_budget.DescriptorLimitError):
        return exc
    if isinstance(exc, BaseExceptionGroup):
        return next((found for inner in exc.exceptions if (found := startup_error(inner)) is not None), None)
    return None


if __name__ == "__main__":
    sys.exit(main())
