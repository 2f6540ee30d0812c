"""An exactly-once consume-transform-produce copier on a stock client, run as a subprocess by the copier tests.

    python tests/support/copier.py --client confluent|kafka-python|oncelog --bootstrap B --group G --input IN \\
        --output OUT --transactional-id T --instance-id I [--batch N] [--session-ms MS]

A consumer in group G (subscribe, read_committed, no auto commit, auto.offset.reset earliest, static membership
through group.instance.id I) feeds a transactional producer (transactional.id T). Each loop: poll up to ``--batch``
records, begin a transaction, produce ``transform(record)`` to the same partition of OUT, send the consumer's
positions with its group metadata (send_offsets_to_transaction), commit. An abortable error aborts the transaction
and rewinds every assigned partition to its committed offset (Kafka's EOS loop); a retriable one is retried; a
fencing or other fatal error exits with ``EXIT_FENCED`` / ``EXIT_FATAL``.

Exit 0 once caught up: the group owns partitions, every assigned partition's position equals the input's end offset
and no record arrived for ``--idle-s`` seconds (default 2). Progress lines go to stdout (``committed N``).

``transform``: key kept, value -> ``b"T:" + value``, one header ``src`` = ``b"<partition>:<offset>"`` of the input.
"""

from __future__ import annotations

import argparse
import faulthandler
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

SRC_HEADER = "src"
VALUE_PREFIX = b"T:"
EXIT_FENCED = 2
EXIT_FATAL = 3
#: How long a retriable error is retried before the copier gives up with EXIT_FATAL.
RETRY_DEADLINE_S = 30.0
#: Consumer session.timeout.ms (Kafka default 45000): short, so that a dead non-static copier is noticed soon.
DEFAULT_SESSION_MS = 6000
HEARTBEAT_MS = 500
#: transaction.timeout.ms (Kafka default 60000): a killed copier's transaction is normally aborted sooner, by the
#: InitProducerId of its successor.
TXN_TIMEOUT_MS = 20000

T = TypeVar("T")
#: librdkafka 2.16 re-bootstraps when every broker is down (a restarting single node): the old broker handle
#: then spins in "terminating" and a pending coordinator request (send_offsets_to_transaction's TxnOffsetCommit)
#: hangs past its API timeout. A client bug; the copier turns re-bootstrapping off.
RDKAFKA_WORKAROUNDS = {"metadata.recovery.strategy": "none"}


def src_header(partition: int, offset: int) -> bytes:
    return b"%d:%d" % (partition, offset)


def transform(value: bytes | None) -> bytes:
    """The output value of an input value (a null value becomes ``b"T:"``)."""
    return VALUE_PREFIX + (value or b"")


def next_offsets(records: list[Any]) -> dict[int, int]:
    """partition -> offset after the batch's last record there: what the transaction commits. (Not the consumer's
    position: a consumer fenced out of its group has no assignment, and committing no offsets would let a zombie's
    output through.)"""
    out: dict[int, int] = {}
    for r in records:
        partition, offset = (r.partition(), r.offset()) if callable(r.partition) else (r.partition, r.offset)
        out[partition] = max(out.get(partition, 0), offset + 1)
    return out


@dataclass(frozen=True)
class Args:
    client: str
    bootstrap: str
    group: str
    input: str
    output: str
    transactional_id: str
    instance_id: str
    batch: int
    session_ms: int
    idle_s: float


class Fenced(Exception):
    """This copier was fenced (producer epoch or group membership): a successor took over."""


class Fatal(Exception):
    """An error the copier cannot recover from by aborting."""


class Abortable(Exception):
    """The transaction must be aborted and the consumer rewound."""


_STARTED = time.monotonic()


def say(text: str) -> None:
    """One progress line on stdout, prefixed by the seconds since the copier started."""
    print(f"{time.monotonic() - _STARTED:7.2f} {text}", flush=True)


class _Copier:
    """What both copiers share: retrying an operation while its client calls the error retriable."""

    @staticmethod
    def _classify(exc: Exception) -> Exception:
        """``exc`` itself when retriable, else the Fenced/Fatal/Abortable it means."""
        raise NotImplementedError

    def _retry(self, op: Callable[[], T]) -> T:
        end = time.monotonic() + RETRY_DEADLINE_S
        while True:
            try:
                return op()
            except Exception as exc:
                kind = self._classify(exc)
                if kind is not exc or time.monotonic() > end:
                    raise kind if kind is not exc else Fatal(f"retriable error for {RETRY_DEADLINE_S}s: {exc}") from exc
                say(f"retrying: {exc}")
                time.sleep(0.2)


class ConfluentCopier(_Copier):
    def __init__(self, args: Args) -> None:
        from confluent_kafka import Consumer, Producer

        self.args = args
        self.consumer = Consumer(
            {
                "bootstrap.servers": args.bootstrap,
                "group.id": args.group,
                "group.instance.id": args.instance_id,
                "session.timeout.ms": args.session_ms,
                "heartbeat.interval.ms": HEARTBEAT_MS,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                **RDKAFKA_WORKAROUNDS,
            }
        )
        self.producer = Producer(
            {
                "bootstrap.servers": args.bootstrap,
                "transactional.id": args.transactional_id,
                "transaction.timeout.ms": TXN_TIMEOUT_MS,
                "linger.ms": 5,
                **RDKAFKA_WORKAROUNDS,
                **({"debug": os.environ["COPIER_RDKAFKA_DEBUG"]} if os.environ.get("COPIER_RDKAFKA_DEBUG") else {}),
            }
        )
        self._retry(lambda: self.producer.init_transactions(10))
        self.consumer.subscribe([args.input])

    # Error classification ------------------------------------------------------------------------------------

    @staticmethod
    def _classify(exc: Exception) -> Exception:
        from confluent_kafka import KafkaError, KafkaException

        if not isinstance(exc, KafkaException) or not isinstance(exc.args[0], KafkaError):
            return Fatal(repr(exc))
        err: KafkaError = exc.args[0]
        fencing = {
            KafkaError._FENCED,
            KafkaError.INVALID_PRODUCER_EPOCH,
            KafkaError.PRODUCER_FENCED,
            KafkaError.FENCED_INSTANCE_ID,
        }
        if err.code() in fencing or "fenced" in err.str().lower():
            return Fenced(err.str())
        if err.fatal():
            return Fatal(err.str())
        if err.txn_requires_abort():
            return Abortable(err.str())
        if err.retriable():
            return exc
        return Abortable(err.str())

    # The loop --------------------------------------------------------------------------------------------------

    def poll(self) -> list[Any]:
        from confluent_kafka import KafkaError

        out = []
        for m in self.consumer.consume(num_messages=self.args.batch, timeout=0.5):
            err = m.error()
            if err is None:
                out.append(m)
            elif err.fatal():
                raise Fatal(err.str())
            elif err.code() == KafkaError.FENCED_INSTANCE_ID:
                raise Fenced(err.str())
            # Anything else (partition EOF, transport errors) is informational for a consumer.
        return out

    def copy(self, records: list[Any]) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        try:
            self.producer.begin_transaction()
            for m in records:
                self.producer.produce(
                    self.args.output,
                    key=m.key(),
                    value=transform(m.value()),
                    partition=m.partition(),
                    headers=[(SRC_HEADER, src_header(m.partition(), m.offset()))],
                )
            positions = [TopicPartition(self.args.input, p, o) for p, o in next_offsets(records).items()]
            self._retry(
                lambda: self.producer.send_offsets_to_transaction(
                    positions, self.consumer.consumer_group_metadata(), 10
                )
            )
            self._retry(lambda: self.producer.commit_transaction(10))
        except KafkaException as exc:
            raise self._classify(exc) from exc

    def abort_and_rewind(self) -> None:
        from confluent_kafka import OFFSET_BEGINNING, TopicPartition

        self._retry(lambda: self.producer.abort_transaction(10))
        assignment = self.consumer.assignment()
        committed = self._retry(lambda: self.consumer.committed(assignment, timeout=10))
        for tp in committed:
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING
            self._retry(lambda tp=tp, offset=offset: self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset)))

    def caught_up(self) -> bool:
        """Partitions assigned and each one's position (or committed offset) is the input's end offset."""
        assignment = self.consumer.assignment()
        if not assignment:
            return False
        positions = {tp.partition: tp.offset for tp in self.consumer.position(assignment)}
        committed = {tp.partition: tp.offset for tp in self.consumer.committed(assignment, timeout=10)}
        for tp in assignment:
            _, high = self.consumer.get_watermark_offsets(tp, timeout=10)
            at = positions[tp.partition] if positions[tp.partition] >= 0 else committed[tp.partition]
            if at != high or committed[tp.partition] != high:
                return False
        return True

    def close(self) -> None:
        self.consumer.close()
        self.producer.flush(5)


class KafkaPythonCopier(_Copier):
    def __init__(self, args: Args) -> None:
        from kafka import KafkaConsumer, KafkaProducer

        self.args = args
        self.producer = KafkaProducer(
            bootstrap_servers=args.bootstrap,
            transactional_id=args.transactional_id,
            transaction_timeout_ms=TXN_TIMEOUT_MS,
            linger_ms=5,
        )
        self._retry(self.producer.init_transactions)
        self.consumer = KafkaConsumer(
            bootstrap_servers=args.bootstrap,
            group_id=args.group,
            group_instance_id=args.instance_id,
            session_timeout_ms=args.session_ms,
            heartbeat_interval_ms=HEARTBEAT_MS,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=args.batch,
        )
        self.consumer.partitions_for_topic(args.input)  # metadata before the first join: see group_clients.py
        self.consumer.subscribe([args.input])

    @staticmethod
    def _classify(exc: Exception) -> Exception:
        from kafka import errors

        fencing = (
            errors.ProducerFencedError,
            errors.InvalidProducerEpochError,
            errors.FencedInstanceIdError,
            errors.TransactionalIdAuthorizationFailedError,
        )
        if isinstance(exc, fencing):
            return Fenced(repr(exc))
        if isinstance(exc, errors.KafkaError) and getattr(exc, "retriable", False):
            return exc
        if isinstance(exc, (errors.KafkaError, errors.IllegalStateError)):
            return Abortable(repr(exc))
        return Fatal(repr(exc))

    def _batches(self) -> dict[Any, list[Any]]:
        return self.consumer.poll(timeout_ms=500, max_records=self.args.batch)

    def poll(self) -> list[Any]:
        try:
            batches = self._batches()
        except Exception as exc:
            kind = self._classify(exc)
            if isinstance(kind, (Fenced, Fatal)):
                raise kind from exc
            return []
        return [r for records in batches.values() for r in records]

    def copy(self, records: list[Any]) -> None:
        from kafka import OffsetAndMetadata, TopicPartition

        try:
            self.producer.begin_transaction()
            futures = [
                self.producer.send(
                    self.args.output,
                    key=r.key,
                    value=transform(r.value),
                    partition=r.partition,
                    headers=[(SRC_HEADER, src_header(r.partition, r.offset))],
                )
                for r in records
            ]
            offsets = {
                TopicPartition(self.args.input, p): OffsetAndMetadata(o, "", -1)
                for p, o in next_offsets(records).items()
            }
            self.producer.send_offsets_to_transaction(offsets, self.consumer.group_metadata())
            self.producer.commit_transaction()
            for future in futures:
                future.get(0)  # a failed send must not go unnoticed (commit would have failed anyway)
        except Exception as exc:
            raise self._classify(exc) from exc

    def abort_and_rewind(self) -> None:
        try:
            self.producer.abort_transaction()
        except Exception as exc:
            kind = self._classify(exc)
            raise (kind if isinstance(kind, Fenced) else Fatal(f"abort failed: {exc!r}")) from exc
        for tp in self.consumer.assignment():
            offset = self._retry(lambda tp=tp: self.consumer.committed(tp))
            if offset is None:
                self.consumer.seek_to_beginning(tp)
            else:
                self.consumer.seek(tp, offset)

    def caught_up(self) -> bool:
        assignment = self.consumer.assignment()
        if not assignment:
            return False
        ends = self.consumer.end_offsets(list(assignment))
        for tp in assignment:
            if self.consumer.position(tp) != ends[tp] or self.consumer.committed(tp) != ends[tp]:
                return False
        return True

    def close(self) -> None:
        self.consumer.close()
        self.producer.close(5)


class OncelogCopier(KafkaPythonCopier):
    """The bundled client (``oncelog.client.sync``), whose API is kafka-python's shape (``poll``, ``abort_and_rewind``
    are shared); it has no static membership, so ``--instance-id`` is unused."""

    def __init__(self, args: Args) -> None:
        from oncelog.client import sync

        self.args = args
        self.producer = sync.Producer(
            args.bootstrap, transactional_id=args.transactional_id, transaction_timeout_ms=TXN_TIMEOUT_MS, linger_ms=5
        )
        self._retry(self.producer.init_transactions)
        self.consumer = sync.Consumer(
            args.bootstrap,
            group_id=args.group,
            session_timeout_ms=args.session_ms,
            heartbeat_interval_ms=HEARTBEAT_MS,
            isolation_level="read_committed",
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            max_poll_records=args.batch,
        )
        self.consumer.subscribe([args.input])

    @staticmethod
    def _classify(exc: Exception) -> Exception:
        from oncelog.client import errors
        from oncelog.protocol import ErrorCode

        fencing = {ErrorCode.PRODUCER_FENCED, ErrorCode.INVALID_PRODUCER_EPOCH, ErrorCode.FENCED_INSTANCE_ID}
        if isinstance(exc, errors.ProducerFencedError) or getattr(exc, "code", None) in fencing:
            return Fenced(repr(exc))
        if isinstance(exc, errors.FatalProducerError):
            return Fatal(repr(exc))
        if isinstance(exc, (errors.AbortableTransactionError, errors.TransactionAbortedError)):
            return Abortable(repr(exc))
        if isinstance(exc, errors.KafkaError):
            return exc if exc.retriable else Abortable(repr(exc))
        return Fatal(repr(exc))

    def _batches(self) -> dict[Any, list[Any]]:
        return self.consumer.getmany(timeout_ms=500, max_records=self.args.batch)

    def copy(self, records: list[Any]) -> None:
        from oncelog.client.types import TopicPartition

        try:
            self.producer.begin_transaction()
            handles = [
                self.producer.send(
                    self.args.output,
                    transform(r.value),
                    r.key,
                    partition=r.partition,
                    headers=[(SRC_HEADER, src_header(r.partition, r.offset))],
                )
                for r in records
            ]
            offsets = {TopicPartition(self.args.input, p): o for p, o in next_offsets(records).items()}
            self.producer.send_offsets_to_transaction(offsets, self.consumer.group_metadata())
            self.producer.commit_transaction()
            for handle in handles:
                handle.get(0)  # a failed send must not go unnoticed (commit would have failed anyway)
        except Exception as exc:
            raise self._classify(exc) from exc

    def caught_up(self) -> bool:
        from oncelog.client.errors import KafkaError

        assignment = list(self.consumer.assignment())
        if not assignment:
            return False
        try:
            ends = self.consumer.list_offsets(assignment, -1)
            return all(
                self.consumer.position(tp) == ends[tp] and self.consumer.committed(tp) == ends[tp] for tp in assignment
            )
        except KafkaError as exc:  # e.g. a leader that just died: ask again at the next idle poll
            say(f"not known to be caught up: {exc!r}")
            return False

    def close(self) -> None:
        self.consumer.close()
        self.producer.close()


COPIERS = {"confluent": ConfluentCopier, "kafka-python": KafkaPythonCopier, "oncelog": OncelogCopier}


def run(args: Args) -> int:
    """The copier's loop; returns the process exit code."""
    try:
        copier = COPIERS[args.client](args)
    except (Fenced, Fatal) as exc:
        say(f"startup failed: {exc!r}")
        return EXIT_FENCED if isinstance(exc, Fenced) else EXIT_FATAL
    say("started")
    committed = 0
    last_record = time.monotonic()
    try:
        while True:
            try:
                records = copier.poll()
                if not records:
                    if time.monotonic() - last_record >= args.idle_s and copier.caught_up():
                        say(f"caught up after {committed} records")
                        return 0
                    continue
                last_record = time.monotonic()
                copier.copy(records)
                committed += len(records)
                say(f"committed {committed}")
            except Abortable as exc:
                say(f"aborting: {exc}")
                copier.abort_and_rewind()
    except Fenced as exc:
        say(f"fenced: {exc}")
        return EXIT_FENCED
    except Fatal as exc:
        say(f"fatal: {exc}")
        return EXIT_FATAL
    finally:
        try:
            copier.close()
        except Exception as exc:  # closing after a fatal error may fail too; the exit code already tells
            say(f"close failed: {exc!r}")


def parse_args(argv: list[str] | None = None) -> Args:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--client", choices=sorted(COPIERS), required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--transactional-id", required=True)
    parser.add_argument("--instance-id", required=True)
    parser.add_argument("--batch", type=int, default=200, help="records per transaction at most")
    parser.add_argument("--session-ms", type=int, default=DEFAULT_SESSION_MS)
    parser.add_argument("--idle-s", type=float, default=2.0, help="quiet time before exiting once caught up")
    ns = parser.parse_args(argv)
    return Args(
        ns.client,
        ns.bootstrap,
        ns.group,
        ns.input,
        ns.output,
        ns.transactional_id,
        ns.instance_id,
        ns.batch,
        ns.session_ms,
        ns.idle_s,
    )


if __name__ == "__main__":
    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 <pid>` prints every thread's stack to stderr
    sys.exit(run(parse_args()))
