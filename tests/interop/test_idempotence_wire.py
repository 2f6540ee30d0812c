"""Idempotent produce at the wire level: resend dedup, sequence gaps, fenced epochs.

Uses ``support.wire`` (hand-encoded InitProducerId v1 / Produce v3 / ListOffsets v1 and v2 batches), so it
does not depend on oncelog's own codecs.
"""

from __future__ import annotations

from support.wire import (
    ERROR_INVALID_PRODUCER_EPOCH,
    ERROR_NONE,
    ERROR_OUT_OF_ORDER_SEQUENCE_NUMBER,
    Record,
    WireClient,
    encode_batch,
)


def _records(n: int, tag: str) -> list[Record]:
    return [Record(f"{tag}-{i}".encode(), f"value-{tag}-{i}".encode(), (("h", b"\x00\x01"),)) for i in range(n)]


def test_resend_returns_original_offsets(bootstrap: str, make_topic) -> None:
    topic = make_topic("wire-dup", 1)
    with WireClient(bootstrap) as c:
        err, pid, epoch = c.init_producer_id()
        assert err == ERROR_NONE and pid >= 0 and epoch >= 0
        # A non-idempotent batch first so the idempotent one does not start at offset 0.
        assert c.produce(topic, 0, encode_batch(_records(2, "plain"))).error_code == ERROR_NONE
        batch = encode_batch(_records(3, "a"), producer_id=pid, producer_epoch=epoch, base_sequence=0)
        first = c.produce(topic, 0, batch)
        assert (first.error_code, first.base_offset) == (ERROR_NONE, 2)
        assert c.list_offset(topic, 0) == (ERROR_NONE, 5)

        again = c.produce(topic, 0, batch)
        assert (again.error_code, again.base_offset) == (ERROR_NONE, first.base_offset)
        assert c.list_offset(topic, 0) == (ERROR_NONE, 5), "duplicate batch was appended"

        nxt = c.produce(
            topic, 0, encode_batch(_records(1, "b"), producer_id=pid, producer_epoch=epoch, base_sequence=3)
        )
        assert (nxt.error_code, nxt.base_offset) == (ERROR_NONE, 5)
        assert c.list_offset(topic, 0) == (ERROR_NONE, 6)


def test_sequence_gap_is_out_of_order(bootstrap: str, make_topic) -> None:
    topic = make_topic("wire-gap", 1)
    with WireClient(bootstrap) as c:
        _, pid, epoch = c.init_producer_id()
        ok = c.produce(topic, 0, encode_batch(_records(2, "a"), producer_id=pid, producer_epoch=epoch, base_sequence=0))
        assert ok.error_code == ERROR_NONE
        gap = c.produce(
            topic, 0, encode_batch(_records(1, "b"), producer_id=pid, producer_epoch=epoch, base_sequence=3)
        )
        assert gap.error_code == ERROR_OUT_OF_ORDER_SEQUENCE_NUMBER
        assert c.list_offset(topic, 0) == (ERROR_NONE, 2), "out-of-order batch was appended"


def test_old_epoch_is_rejected(bootstrap: str, make_topic) -> None:
    topic = make_topic("wire-epoch", 1)
    with WireClient(bootstrap) as c:
        _, pid, epoch = c.init_producer_id()
        r = c.produce(topic, 0, encode_batch(_records(1, "a"), producer_id=pid, producer_epoch=epoch, base_sequence=0))
        assert r.error_code == ERROR_NONE
        # A higher epoch starting again at sequence 0 is accepted and fences the old one (Kafka semantics).
        bumped = encode_batch(_records(1, "b"), producer_id=pid, producer_epoch=epoch + 1, base_sequence=0)
        assert c.produce(topic, 0, bumped).error_code == ERROR_NONE
        old = encode_batch(_records(1, "c"), producer_id=pid, producer_epoch=epoch, base_sequence=1)
        assert c.produce(topic, 0, old).error_code == ERROR_INVALID_PRODUCER_EPOCH
        assert c.list_offset(topic, 0) == (ERROR_NONE, 2), "fenced batch was appended"
