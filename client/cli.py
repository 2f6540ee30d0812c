"""Command-line tools built on the async client: ``topic``, ``produce``, ``consume``, ``txn``, ``copy``.

``add_subcommands(subparsers)`` registers them on the ``oncelog`` parser; ``run(args)`` executes one and returns
the exit code (0 ok, 1 a Kafka error, 2 bad usage, 130 stopped by SIGINT or SIGTERM). SIGINT (Ctrl-C) and SIGTERM
end every command quietly with a summary line on stderr (the records read or written so far); for ``consume``,
whose normal end it is, the group's offsets are committed and the exit code is 0. Every command takes
``--bootstrap-server`` (default 127.0.0.1:9092) and ``--command-config FILE`` (security.protocol with the ssl.* and
sasl.* settings of ``client.security``).
"""

from __future__ import annotations

import argparse
import codecs
import importlib
import json
import os
import signal
import stat
import sys
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import IO, Any

import anyio
from oncelog.client.admin import HIGH_WATERMARK, USE_BROKER_DEFAULT, Admin, HangingTransaction
from oncelog.client.consumer import Consumer
from oncelog.client.errors import KafkaError
from oncelog.client.group_lag import as_json, format_table, group_partitions, lag_rows
from oncelog.client.producer import Producer
from oncelog.client.progress import ProgressBar
from oncelog.client.security import read_command_config
from oncelog.client.types import ConsumerRecord, PartitionReplicas, TopicPartition

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
CLIENT_COMMANDS = ("topic", "cluster", "produce", "consume", "txn", "group", "copy", "delay", "dlq")
#: The exit code of a command stopped by SIGINT or SIGTERM (the shell's 128 + SIGINT).
EXIT_INTERRUPTED = 130
#: ListOffsets' timestamp of the log-end offset.
LATEST = -1
#: Lines ``produce`` reads from a regular file between two checkpoints (where a signal can stop it).
_LINES_PER_CHECKPOINT = 1000
#: How much one read of a terminal or pipe may take, and how many such reads may wait to be produced.
_PIPE_READ_BYTES = 65536
_PIPE_BATCHES_QUEUED = 16


@dataclass
class Tally:
    """What a command did so far, for the summary line of an interrupted one."""

    read: int = 0
    written: int = 0
    #: Of the records written, those the broker acknowledged (produce).
    acknowledged: int = 0
    #: Set by a command whose work may be stopped gracefully: a signal cancels this scope, not the whole command.
    stop_scope: anyio.CancelScope | None = None
    #: The signal that stopped the command, if one did.
    signal: signal.Signals | None = None

    def set_counts(self, read: int, written: int) -> None:
        self.read, self.written = read, written


Handler = Callable[[argparse.Namespace, IO[str], IO[str], Tally], Awaitable[int]]


def _offset_or_end(text: str) -> int:
    """``--before``: a non-negative offset, or ``end`` for the high watermark."""
    if text == "end":
        return HIGH_WATERMARK
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"expected a non-negative offset or 'end', got {text!r}")
    return int(text)


def _bootstrap(p: argparse.ArgumentParser) -> None:
    p.add_argument("--bootstrap-server", "-b", default=DEFAULT_BOOTSTRAP, help="HOST:PORT[,HOST:PORT...]")
    p.add_argument(
        "--command-config",
        default=None,
        metavar="FILE",
        help="properties file with security.protocol and the ssl.* / sasl.* settings (ssl.ca.location, ...)",
    )


def _security(args: argparse.Namespace) -> dict[str, str]:
    """The client keyword arguments of ``--command-config`` (none without it)."""
    return read_command_config(args.command_config) if args.command_config else {}


def add_subcommands(subparsers: argparse._SubParsersAction) -> None:
    """Register the client commands on ``subparsers`` (each sets ``args.client_command``)."""
    topic = subparsers.add_parser("topic", help="create, list, describe, alter or delete topics, or their records")
    tsub = topic.add_subparsers(dest="action", required=True)
    create = tsub.add_parser("create", help="create a topic")
    create.add_argument("name")
    create.add_argument(
        "--partitions", "-p", type=int, default=USE_BROKER_DEFAULT, help="default: the broker's num.partitions"
    )
    create.add_argument(
        "--replication-factor",
        type=int,
        default=USE_BROKER_DEFAULT,
        help="default: the broker's default.replication.factor",
    )
    create.add_argument("--config", action="append", default=[], metavar="KEY=VALUE")
    lst = tsub.add_parser("list", help="list topics")
    lst.add_argument("--internal", action="store_true", help="include internal topics")
    describe = tsub.add_parser("describe", help="partitions and leaders of topics")
    describe.add_argument("names", nargs="+")
    delete = tsub.add_parser("delete", help="delete topics")
    delete.add_argument("names", nargs="+")
    alter = tsub.add_parser("alter", help="add partitions to a topic")
    alter.add_argument("name")
    alter.add_argument("--partitions", "-p", type=int, required=True, help="the new (higher) partition count")
    delrec = tsub.add_parser("delete-records", help="delete a partition's records below an offset")
    delrec.add_argument("name")
    delrec.add_argument("--partition", type=int, required=True)
    delrec.add_argument(
        "--before",
        type=_offset_or_end,
        required=True,
        metavar="OFFSET",
        help="delete the records below this offset; 'end' for the high watermark (all of them)",
    )
    for p in (create, lst, describe, delete, alter, delrec):
        _bootstrap(p)

    cluster = subparsers.add_parser("cluster", help="describe the cluster: brokers, controller, partition health")
    csub = cluster.add_subparsers(dest="action", required=True)
    cdesc = csub.add_parser(
        "describe", help="brokers, the controller, and under-replicated and offline partitions (internal included)"
    )
    _bootstrap(cdesc)

    produce = subparsers.add_parser("produce", help="write lines of stdin or a file as records")
    produce.add_argument("topic")
    produce.add_argument("--file", "-f", default=None, help="read this file instead of stdin")
    produce.add_argument("--key-separator", default=None, help="split each line into KEY<sep>VALUE")
    produce.add_argument("--partition", type=int, default=None)
    produce.add_argument(
        "--transactional", metavar="TRANSACTIONAL_ID", default=None, help="write every line in one transaction"
    )
    produce.add_argument("--compression", default=None, choices=["none", "gzip", "snappy", "lz4", "zstd"])
    _bootstrap(produce)

    consume = subparsers.add_parser("consume", help="print records of a topic")
    consume.add_argument("topic")
    consume.add_argument("--partition", type=int, action="append", default=None)
    consume.add_argument("--isolation", choices=["read_uncommitted", "read_committed"], default="read_uncommitted")
    consume.add_argument("--from-beginning", action="store_true")
    consume.add_argument("--group", default=None, help="start from and commit this group's offsets")
    consume.add_argument("--json", action="store_true", help="one JSON object per record")
    consume.add_argument("--count", type=int, default=None, help="stop after this many records")
    consume.add_argument(
        "--idle-timeout-ms",
        type=int,
        default=None,
        help="stop when nothing arrives for this long (default: wait forever)",
    )
    _bootstrap(consume)

    txn = subparsers.add_parser("txn", help="list, describe or abort transactions")
    xsub = txn.add_subparsers(dest="action", required=True)
    xlist = xsub.add_parser(
        "list",
        help="transactions known to the coordinators, then hanging ones",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Prints one line per transaction the coordinators know:\n"
        "  TRANSACTIONAL_ID<TAB>producer_id=N<TAB>state=STATE\n"
        "then one line per hanging transaction (open on a partition, but not open there on its\n"
        "coordinator; it holds the partition's last stable offset back until aborted):\n"
        "  hanging<TAB>TOPIC-PARTITION<TAB>producer_id=N<TAB>producer_epoch=N<TAB>coordinator_epoch=N"
        "<TAB>start_offset=N<TAB>last_timestamp=MS\n"
        "Clear one with: oncelog txn abort --topic TOPIC --partition PARTITION --producer-id N",
    )
    xlist.add_argument(
        "--state",
        action="append",
        default=[],
        help="list only coordinator transactions in this state (repeatable; hanging lines are still printed)",
    )
    xlist.add_argument("--hanging", action="store_true", help="print only the hanging lines")
    xlist.add_argument(
        "--topic",
        action="append",
        default=None,
        help="look for hanging transactions only in this topic (repeatable; default: all non-internal topics)",
    )
    xdesc = xsub.add_parser("describe", help="state and partitions of transactional ids")
    xdesc.add_argument("ids", nargs="+")
    xabort = xsub.add_parser("abort", help="abort a hanging transaction on one partition")
    xabort.add_argument("--topic", required=True)
    xabort.add_argument("--partition", type=int, required=True)
    xabort.add_argument("--producer-id", type=int, required=True)
    xabort.add_argument("--producer-epoch", type=int, default=None, help="default: from DescribeProducers")
    xabort.add_argument("--coordinator-epoch", type=int, default=0)
    for p in (xlist, xdesc, xabort):
        _bootstrap(p)

    group = subparsers.add_parser("group", help="list or describe consumer groups, or delete their offsets")
    gsub = group.add_subparsers(dest="action", required=True)
    glist = gsub.add_parser("list", help="groups known to the coordinators, one id a line")
    glist.add_argument(
        "--state",
        nargs="?",
        const="",
        default=None,
        metavar="STATE[,STATE...]",
        help="print GROUP and STATE columns; with states, only the groups in them (as kafka-consumer-groups.sh)",
    )
    gdesc = gsub.add_parser(
        "describe",
        help="per partition: committed offset, log-end offset, lag and member (kafka-consumer-groups.sh --describe)",
    )
    gdesc.add_argument("ids", nargs="+")
    gdesc.add_argument(
        "--topic", action="append", default=None, help="only this topic, with its partitions never committed"
    )
    gdesc.add_argument("--json", action="store_true", help="a JSON array of row objects instead of the table")
    gdel = gsub.add_parser("delete-offsets", help="delete a group's committed offsets of a topic")
    gdel.add_argument("group")
    gdel.add_argument("--topic", required=True)
    gdel.add_argument(
        "--partition",
        type=int,
        action="append",
        default=None,
        help="only this partition (repeatable; default: every partition of the topic)",
    )
    for p in (glist, gdesc, gdel):
        _bootstrap(p)

    copy = subparsers.add_parser("copy", help="exactly-once copy IN -> OUT through an optional transform")
    copy.add_argument("input")
    copy.add_argument("output")
    copy.add_argument("--group", default=None, help="commit input offsets to this group inside each transaction")
    copy.add_argument(
        "--transform",
        default=None,
        metavar="MODULE:FUNCTION",
        help="called with each ConsumerRecord; returns None (drop), a value, (key, value) or a list",
    )
    copy.add_argument("--transactional-id", default=None, help="default: oncelog-copy-IN-OUT")
    copy.add_argument("--idle-timeout-ms", type=int, default=2000, help="stop when the input is idle this long")
    copy.add_argument("--batch", type=int, default=500, help="records per transaction")
    copy.add_argument(
        "--retry-delays-ms",
        default=None,
        metavar="MS[,MS...]",
        help="retry a record whose transform raises after these delays, then dead-letter it (needs --group)",
    )
    copy.add_argument("--dead-letter-topic", default=None, help="with --retry-delays-ms (default: GROUP-dlt)")
    copy.add_argument("--delay-levels", default=None, help="the brokers' delay.levels, when not the default")
    _bootstrap(copy)

    delay = subparsers.add_parser("delay", help="delayed delivery: pending records and lateness per delay level")
    dsub = delay.add_subparsers(dest="action", required=True)
    _bootstrap(dsub.add_parser("stats", help="per level: pending records, last forward, its largest lateness"))
    dlq = subparsers.add_parser("dlq", help="show or replay a dead-letter topic")
    qsub = dlq.add_subparsers(dest="action", required=True)
    qshow = qsub.add_parser("show", help="one line per dead letter: where from, why, after how many attempts")
    qshow.add_argument("topic")
    qshow.add_argument("--count", type=int, default=None, help="at most this many")
    qreplay = qsub.add_parser("replay", help="exactly-once copy back to each record's original topic")
    qreplay.add_argument("topic")
    qreplay.add_argument("--to", default=None, help="replay every record to this topic instead")
    qreplay.add_argument("--group", default=None, help="the replay's group (default: oncelog-dlq-replay-TOPIC)")
    qreplay.add_argument("--idle-timeout-ms", type=int, default=2000, help="stop when the topic is idle this long")
    for p in (qshow, qreplay):
        _bootstrap(p)

    for name in CLIENT_COMMANDS:
        subparsers.choices[name].set_defaults(client_command=name)


def run(args: argparse.Namespace, *, stdin: IO[str] | None = None, stdout: IO[str] | None = None) -> int:
    """Execute the parsed client command; returns the process exit code."""
    out = stdout or sys.stdout
    handler: Handler = {
        "topic": _topic,
        "cluster": _cluster,
        "produce": _produce,
        "consume": _consume,
        "txn": _txn,
        "group": _group,
        "copy": _copy,
        "delay": _delay,
        "dlq": _dlq,
    }[args.client_command]
    tally = Tally()
    try:
        code = anyio.run(_until_signal, handler, args, stdin or sys.stdin, out, tally)
    except KafkaError as exc:
        print(f"oncelog: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except (ValueError, ImportError, AttributeError) as exc:
        print(f"oncelog: {exc}", file=sys.stderr)
        return 2
    if tally.signal is None:
        return code if code is not None else EXIT_INTERRUPTED
    print(_summary(args.client_command, tally), file=sys.stderr)
    return 0 if args.client_command == "consume" else EXIT_INTERRUPTED


def _summary(command: str, tally: Tally) -> str:
    """The stderr line of a command stopped by a signal."""
    done = {
        "consume": f"{tally.read} records consumed",
        "produce": f"{tally.written} records sent, {tally.acknowledged} acknowledged",
        "copy": f"{tally.read} records read, {tally.written} written (committed transactions)",
    }.get(command)
    return f"oncelog {command}: stopped by {tally.signal.name if tally.signal else 'a signal'}" + (
        f"; {done}" if done else ""
    )


async def _until_signal(handler: Handler, args: argparse.Namespace, stdin: IO[str], out: IO[str], tally: Tally) -> int:
    """Run ``handler``; SIGINT or SIGTERM cancels its ``tally.stop_scope`` when it set one, else the whole handler
    (which then returns None). An error of the handler is raised as itself, not in an exception group."""
    result: list[int] = []
    failure: list[BaseException] = []
    async with anyio.create_task_group() as group:

        async def main() -> None:
            try:
                result.append(await handler(args, stdin, out, tally))
            except Exception as exc:
                failure.append(exc)
            finally:
                group.cancel_scope.cancel()

        if threading.current_thread() is threading.main_thread():
            group.start_soon(_stop_on_signal, group.cancel_scope, tally)
        group.start_soon(main)
    if failure:
        raise failure[0]
    return result[0] if result else None  # type: ignore[return-value]


async def _stop_on_signal(whole: anyio.CancelScope, tally: Tally) -> None:
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            tally.signal = signal.Signals(signum)
            (tally.stop_scope or whole).cancel()
            if tally.stop_scope is None:
                return


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode(errors="replace")


async def _topic(args: argparse.Namespace, _in: IO[str], out: IO[str], _tally: Tally) -> int:
    async with Admin(args.bootstrap_server, **_security(args)) as admin:
        if args.action == "create":
            configs = dict(item.split("=", 1) for item in args.config)
            await admin.create_topic(
                args.name, args.partitions, replication_factor=args.replication_factor, configs=configs
            )
            print(f"created {args.name}", file=out)
        elif args.action == "list":
            for name in sorted(await admin.list_topics(internal=args.internal)):
                print(name, file=out)
        elif args.action == "alter":
            error = (await admin.create_partitions({args.name: args.partitions}))[args.name]
            if error is not None:
                raise error
            print(f"{args.name} now has {args.partitions} partitions", file=out)
        elif args.action == "delete-records":
            tp = TopicPartition(args.name, args.partition)
            low = (await admin.delete_records({tp: args.before}))[tp]
            print(f"{tp.topic}-{tp.partition}\tlow_watermark={low}", file=out)
        elif args.action == "describe":
            for name, parts in (await admin.describe_partitions(args.names)).items():
                print(f"{name}\tpartitions={len(parts)}\treplication_factor={len(parts[0].replicas)}", file=out)
                for part in parts:
                    print(f"  {_replicas_line(part)}", file=out)
        else:
            code = 0
            for name, err in (await admin.delete_topics(args.names)).items():
                print(f"deleted {name}" if err is None else f"{name}: {err}", file=out)
                code = code or (1 if err else 0)
            return code
    return 0


def _replicas_line(part: PartitionReplicas) -> str:
    """One partition as ``kafka-topics.sh --describe`` shows it: leader, replicas, ISR (and offline replicas)."""
    line = f"partition={part.partition}\tleader={part.leader}\treplicas={_ids(part.replicas)}\tisr={_ids(part.isr)}"
    return line + (f"\toffline={_ids(part.offline)}" if part.offline else "")


def _ids(ids: tuple[int, ...]) -> str:
    return ",".join(map(str, ids))


async def _cluster(args: argparse.Namespace, _in: IO[str], out: IO[str], _tally: Tally) -> int:
    """``cluster describe``: exit code 0 when every partition is fully replicated, 1 otherwise (for scripts)."""
    async with Admin(args.bootstrap_server, **_security(args)) as admin:
        cluster = await admin.describe_cluster()
    print(f"cluster_id={cluster.cluster_id}\tcontroller={cluster.controller}", file=out)
    for broker in cluster.brokers:
        rack = f"\track={broker.rack}" if broker.rack else ""
        print(f"broker={broker.node_id}\t{broker.host}:{broker.port}{rack}", file=out)
    partitions = [(topic, part) for topic, parts in sorted(cluster.partitions.items()) for part in parts]
    offline = [(t, p) for t, p in partitions if p.leader < 0]
    under = [(t, p) for t, p in partitions if p.leader >= 0 and p.under_replicated]
    print(f"partitions={len(partitions)}\tunder_replicated={len(under)}\toffline={len(offline)}", file=out)
    for label, items in (("under-replicated", under), ("offline", offline)):
        for topic, part in items:
            print(f"{label}\ttopic={topic}\t{_replicas_line(part)}", file=out)
    return 1 if under or offline else 0


async def _produce(args: argparse.Namespace, stdin: IO[str], out: IO[str], tally: Tally) -> int:
    source = open(args.file, encoding="utf-8") if args.file else stdin  # noqa: SIM115
    try:
        async with Producer(
            args.bootstrap_server,
            transactional_id=args.transactional,
            compression_type=args.compression,
            **_security(args),
        ) as producer:
            if args.transactional:
                await producer.init_transactions()
                await producer.begin_transaction()
            futures = []
            progress = ProgressBar("produce")

            def acknowledged(future: Any) -> None:
                if future.exception() is None:
                    tally.acknowledged += 1

            async for line in _lines(source):
                line = line.rstrip("\n")
                key: str | None = None
                if args.key_separator is not None and args.key_separator in line:
                    key, line = line.split(args.key_separator, 1)
                future = await producer.send(args.topic, line, key, partition=args.partition)
                future.add_done_callback(acknowledged)
                futures.append(future)
                tally.written += 1
                progress.update(1)
            if args.transactional:
                await producer.commit_transaction()
            else:
                await producer.flush()
            for fut in futures:
                await fut
            progress.close()
            print(f"produced {len(futures)} records to {args.topic}", file=sys.stderr)
    finally:
        if source is not stdin:
            source.close()
    return 0


async def _lines(source: IO[str]) -> Any:
    """The lines of ``source``, with universal newlines. A regular file is read here, with a checkpoint every few
    lines; a terminal or pipe by a daemon thread, whatever each read returns at once, so that a signal stops the
    command while it waits for input (the thread, blocked in its read, ends with the process)."""
    try:
        fd = source.fileno()
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except (OSError, ValueError, AttributeError):
        fd, regular = -1, True  # an in-memory stream
    if regular:
        for count, line in enumerate(source):
            if count % _LINES_PER_CHECKPOINT == 0:
                await anyio.lowlevel.checkpoint()
            yield line
        return
    send, receive = anyio.create_memory_object_stream[list[str]](_PIPE_BATCHES_QUEUED)
    token = anyio.lowlevel.current_token()
    decoder = codecs.getincrementaldecoder(getattr(source, "encoding", None) or "utf-8")()

    def read() -> None:
        pending = ""
        try:
            while chunk := os.read(fd, _PIPE_READ_BYTES):
                pending += decoder.decode(chunk)
                # A trailing \r may be the first half of \r\n: keep it for the next chunk.
                cut = len(pending) - 1 if pending.endswith("\r") else len(pending)
                text, pending = pending[:cut].replace("\r\n", "\n").replace("\r", "\n"), pending[cut:]
                *lines, rest = text.split("\n")
                pending = rest + pending
                if lines:
                    anyio.from_thread.run(send.send, [line + "\n" for line in lines], token=token)
            pending += decoder.decode(b"", final=True)
            if pending:
                anyio.from_thread.run(send.send, [pending.replace("\r", "\n")], token=token)
            anyio.from_thread.run_sync(send.close, token=token)
        except (anyio.RunFinishedError, anyio.BrokenResourceError, anyio.ClosedResourceError):
            pass  # the command ended first

    threading.Thread(target=read, name="oncelog-produce-stdin", daemon=True).start()
    async with receive:
        async for batch in receive:
            for line in batch:
                yield line


def _format(record: ConsumerRecord, as_json: bool) -> str:
    if as_json:
        return json.dumps(
            {
                "topic": record.topic,
                "partition": record.partition,
                "offset": record.offset,
                "timestamp": record.timestamp,
                "key": _text(record.key),
                "value": _text(record.value),
                "headers": [[k, _text(v)] for k, v in record.headers],
            }
        )
    return _text(record.value) or ""


async def _consume(args: argparse.Namespace, _in: IO[str], out: IO[str], tally: Tally) -> int:
    reset = "earliest" if args.from_beginning else "latest"
    async with Consumer(
        args.bootstrap_server,
        group_id=args.group,
        isolation_level=args.isolation,
        auto_offset_reset=reset,
        **_security(args),
    ) as consumer:
        parts = args.partition or [tp.partition for tp in await consumer.partitions_for_topic(args.topic)]
        consumer.assign([TopicPartition(args.topic, p) for p in parts])
        if args.from_beginning and args.group is None:
            await consumer.seek_to_beginning()
        seen = 0
        # Drawn only when the records go to a file or pipe, so the bar never overwrites them on the terminal.
        progress = (
            ProgressBar("consume", args.count, enabled=sys.stderr.isatty() and not out.isatty())
            if args.count is not None
            else None
        )
        idle_s = None if args.idle_timeout_ms is None else args.idle_timeout_ms / 1000
        # A signal ends this loop (the consumer's normal end); the offsets are then committed as at any end.
        with anyio.CancelScope() as tally.stop_scope:
            while args.count is None or seen < args.count:
                limit = None if args.count is None else args.count - seen
                got: dict[TopicPartition, list[ConsumerRecord]] = {}
                with anyio.move_on_after(idle_s):
                    while not got:
                        got = await consumer.getmany(timeout_ms=500, max_records=limit)
                if not got:
                    break
                records = sorted((r for rs in got.values() for r in rs), key=lambda r: (r.partition, r.offset))
                for record in records:
                    print(_format(record, args.json), file=out)
                out.flush()
                seen += len(records)
                tally.read = seen
                if progress is not None:
                    progress.update(len(records))
        tally.stop_scope = None
        if progress is not None:
            progress.close()
        if args.group is not None:
            await consumer.commit()
    return 0


def format_hanging(h: HangingTransaction) -> str:
    """The ``txn list`` line of a hanging transaction (tab-separated, starts with ``hanging``)."""
    return (
        f"hanging\t{h.topic}-{h.partition}\tproducer_id={h.producer_id}\tproducer_epoch={h.producer_epoch}"
        f"\tcoordinator_epoch={h.coordinator_epoch}\tstart_offset={h.current_txn_start_offset}"
        f"\tlast_timestamp={h.last_timestamp}"
    )


async def _txn(args: argparse.Namespace, _in: IO[str], out: IO[str], _tally: Tally) -> int:
    async with Admin(args.bootstrap_server, **_security(args)) as admin:
        if args.action == "list":
            if not args.hanging:
                for t in await admin.list_transactions(states=args.state):
                    print(f"{t.transactional_id}\tproducer_id={t.producer_id}\tstate={t.state}", file=out)
            for h in await admin.find_hanging_transactions(args.topic):
                print(format_hanging(h), file=out)
        elif args.action == "describe":
            for tid, d in (await admin.describe_transactions(args.ids)).items():
                parts = ",".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions)
                print(
                    f"{tid}\tstate={d.state}\tproducer_id={d.producer_id}\tepoch={d.producer_epoch}"
                    f"\ttimeout_ms={d.timeout_ms}\tpartitions={parts}",
                    file=out,
                )
        else:
            tp = TopicPartition(args.topic, args.partition)
            epoch = args.producer_epoch
            if epoch is None:
                producers = (await admin.describe_producers([tp])).get(tp, [])
                match = [p for p in producers if p.producer_id == args.producer_id]
                if not match:
                    print(f"producer {args.producer_id} is not active on {tp.topic}-{tp.partition}", file=out)
                    return 1
                epoch = match[0].producer_epoch
            await admin.abort_transaction(tp, args.producer_id, epoch, args.coordinator_epoch)
            print(f"aborted producer {args.producer_id} (epoch {epoch}) on {tp.topic}-{tp.partition}", file=out)
    return 0


async def _group(args: argparse.Namespace, _in: IO[str], out: IO[str], _tally: Tally) -> int:
    async with Admin(args.bootstrap_server, **_security(args)) as admin:
        if args.action == "list":
            states = [s.strip() for s in (args.state or "").split(",") if s.strip()]
            groups = sorted(await admin.list_groups(states=states), key=lambda g: g.group_id)
            if args.state is None:
                for g in groups:
                    print(g.group_id, file=out)
            else:
                width = max([len("GROUP"), *(len(g.group_id) for g in groups)])
                print(f"{'GROUP'.ljust(width)} STATE", file=out)
                for g in groups:
                    print(f"{g.group_id.ljust(width)} {g.state}", file=out)
            return 0
        if args.action == "delete-offsets":
            parts = args.partition
            if parts is None:
                parts = list((await admin.describe_topics([args.topic]))[args.topic])
            await admin.delete_group_offsets(args.group, [TopicPartition(args.topic, p) for p in parts])
            print(f"deleted offsets of {args.group} for " + ",".join(f"{args.topic}-{p}" for p in parts), file=out)
            return 0
        extra = []
        if args.topic:
            extra = [
                TopicPartition(topic, p)
                for topic, parts in (await admin.describe_topics(args.topic)).items()
                for p in parts
            ]
        rows = []
        async with Consumer(args.bootstrap_server, isolation_level="read_uncommitted", **_security(args)) as consumer:
            for gid, description in (await admin.describe_groups(args.ids)).items():
                committed = await admin.list_group_offsets(gid)
                tps = group_partitions(description, committed, extra, args.topic)
                ends = await consumer.list_offsets(tps, LATEST) if tps else {}
                rows += lag_rows(description, committed, ends, tps)
                if not description.members:
                    print(f"Consumer group '{gid}' has no active members.", file=sys.stderr)
        if args.json:
            print(json.dumps(as_json(rows)), file=out)
        else:
            print(format_table(rows), file=out)
    return 0


def load_transform(spec: str) -> Callable[[ConsumerRecord], Any]:
    """``module:function`` -> the function."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError(f"--transform must be MODULE:FUNCTION, got {spec!r}")
    return getattr(importlib.import_module(module), name)


async def _copy(args: argparse.Namespace, _in: IO[str], out: IO[str], tally: Tally) -> int:
    from oncelog.client.eos import copy_topic

    transform = load_transform(args.transform) if args.transform else None
    tid = args.transactional_id or f"oncelog-copy-{args.input}-{args.output}"
    if args.retry_delays_ms is not None:
        return await _copy_with_retries(args, transform, tid, out)
    copied = await copy_topic(
        args.bootstrap_server,
        args.input,
        args.output,
        group_id=args.group,
        transactional_id=tid,
        transform=transform,
        batch=args.batch,
        idle_timeout_ms=args.idle_timeout_ms,
        committed=tally.set_counts,
        **_security(args),
    )
    print(f"copied {copied[0]} records, wrote {copied[1]}", file=out)
    return 0


async def _delay(args: argparse.Namespace, _in: IO[str], out: IO[str], _tally: Tally) -> int:
    from oncelog.client.delay_tools import delay_stats

    print("LEVEL\tPENDING\tLAST-FORWARD-MS\tLAST-MAX-LATENESS-MS", file=out)
    for row in await delay_stats(args.bootstrap_server, **_security(args)):
        last = "-" if row.last_forward_ms is None else str(row.last_forward_ms)
        lateness = "-" if row.last_max_lateness_ms is None else str(row.last_max_lateness_ms)
        print(f"{row.topic}\t{row.pending}\t{last}\t{lateness}", file=out)
    return 0


async def _dlq(args: argparse.Namespace, _in: IO[str], out: IO[str], tally: Tally) -> int:
    from oncelog.client.delay_tools import describe_dead_letter, replay

    if args.action == "replay":
        bar = ProgressBar(f"replay {args.topic}")
        replayed, skipped = await replay(
            args.bootstrap_server,
            args.topic,
            to=args.to,
            group_id=args.group,
            idle_timeout_ms=args.idle_timeout_ms,
            progress=bar.update,
            **_security(args),
        )
        bar.close()
        print(f"replayed {replayed} records, skipped {skipped} without an original topic", file=out)
        return 0
    shown = 0
    async with Consumer(
        args.bootstrap_server, isolation_level="read_committed", auto_offset_reset="earliest", skip_expired=False,
        **_security(args),
    ) as consumer:  # fmt: skip
        consumer.assign(await consumer.partitions_for_topic(args.topic))
        while args.count is None or shown < args.count:
            got = await consumer.getmany(timeout_ms=1000)
            if not got:
                break
            for records in got.values():
                for record in records:
                    if args.count is not None and shown >= args.count:
                        break
                    print(json.dumps(describe_dead_letter(record)), file=out)
                    shown += 1
    return 0


async def _copy_with_retries(
    args: argparse.Namespace, transform: Callable[[ConsumerRecord], Any] | None, tid: str, out: IO[str]
) -> int:
    """``copy --retry-delays-ms``: the exactly-once processor, the transform as its handler."""
    from oncelog.client.eos import outputs_of
    from oncelog.client.processor import process
    from oncelog.client.retry import RetryPolicy

    if args.group is None:
        raise ValueError("--retry-delays-ms needs --group (the retry and dead-letter topics are the group's)")
    delays = tuple(int(item) for item in args.retry_delays_ms.split(",") if item.strip())
    policy = RetryPolicy(delays_ms=delays, dead_letter_topic=args.dead_letter_topic)

    def handler(record: ConsumerRecord) -> list[tuple[str, Any, Any]]:
        result = transform(record) if transform is not None else record.value
        return [(args.output, key, value) for key, value in outputs_of(result, record)]

    extra = {"delay_levels": args.delay_levels} if args.delay_levels else {}
    stats = await process(
        args.bootstrap_server,
        [args.input],
        handler,
        group_id=args.group,
        transactional_id=tid,
        policy=policy,
        batch=args.batch,
        idle_timeout_ms=args.idle_timeout_ms,
        **extra,
        **_security(args),
    )
    print(
        f"copied {stats.read} records, wrote {stats.written}, retried {stats.retried}, "
        f"dead-lettered {stats.dead_lettered}",
        file=out,
    )
    return 0
