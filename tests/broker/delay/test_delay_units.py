"""Delayed delivery's pure parts: levels, the level choice, the routing of one record, the partition buffer, the
bundled producer's scheduling and the dead-letter headers."""

from __future__ import annotations

import random
import struct

import pytest
from oncelog.broker.config import BrokerConfig, ConfigError
from oncelog.broker.delay.buffer import PartitionBuffer
from oncelog.broker.delay.route import (
    REASON_INVALID,
    REASON_TTL,
    Cancelled,
    DeadLetter,
    Deliver,
    Hop,
    Wait,
    route,
)
from oncelog.broker.delay.service import DelayService
from oncelog.broker.delay.topics import delay_topic_spec
from oncelog.client.dead_letter import DLT_ORIGINAL_OFFSET, DLT_ORIGINAL_PARTITION, REASON_HEADER, dead_letter_headers
from oncelog.client.delay import (
    DEFAULT_DELAY_LEVELS,
    DELIVER_AT_HEADER,
    ORIGINAL_TIMESTAMP_HEADER,
    TARGET_HEADER,
    TTL_HEADER,
    choose_level,
    delay_headers,
    expired,
    parse_levels,
    schedule,
)
from oncelog.client.types import ConsumerRecord, TopicPartition

LEVELS = parse_levels("1s,5s,10s,30s")


def record(headers, timestamp=1_000_000, offset=0, topic="__delay-5s", key=b"k") -> ConsumerRecord:
    return ConsumerRecord(topic, 0, offset, timestamp, 0, key, b"v", list(headers))


def test_default_levels_are_the_issues_twelve_plus_four_short_ones() -> None:
    names = [level.name for level in parse_levels(DEFAULT_DELAY_LEVELS)]
    assert names[:4] == ["250ms", "500ms", "1s", "2s"]
    assert names[4:] == ["5s", "10s", "30s", "1m", "2m", "5m", "10m", "20m", "30m", "45m", "1h", "2h"]
    assert parse_levels("2h,5s")[0].topic == "__delay-5s"
    assert [lv.ms for lv in parse_levels("500ms,1m,1d")] == [500, 60_000, 86_400_000]


@pytest.mark.parametrize("text", ["", "5", "5x", "0s", "-1s", "5s,5000ms"])
def test_bad_levels_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_levels(text)
    with pytest.raises(ConfigError):
        BrokerConfig.from_sources({}, {"delay.levels": text}, {}).validate()


def test_choose_level_is_the_longest_not_longer_than_the_remaining_delay() -> None:
    assert choose_level(LEVELS, 999) is None
    assert choose_level(LEVELS, 1000).name == "1s"
    assert choose_level(LEVELS, 9999).name == "5s"
    assert choose_level(LEVELS, 3_600_000).name == "30s"


def test_route_waits_moves_down_then_delivers_never_early() -> None:
    entered = 1_000_000
    due = entered + 17_300  # 17.3 s: 10s level, then 5s, then 1s, then 1.3 s... waited out under the 1 s level
    rec = record(delay_headers("t", due), timestamp=entered, topic="__delay-10s")
    level10 = LEVELS[2]
    assert route(rec, level10, LEVELS, entered + 9_999) == Wait(entered + 10_000)
    assert route(rec, level10, LEVELS, entered + 10_000) == Hop(LEVELS[1], entered)
    moved = record([*delay_headers("t", due), (ORIGINAL_TIMESTAMP_HEADER, b"1000000")], timestamp=entered + 10_000)
    assert route(moved, LEVELS[1], LEVELS, entered + 15_000) == Hop(LEVELS[0], entered)
    last = record(moved.headers, timestamp=entered + 15_000)
    assert route(last, LEVELS[0], LEVELS, entered + 16_000) == Hop(LEVELS[0], entered)  # 1.3 s left: one more 1 s
    final = record(moved.headers, timestamp=entered + 16_800)  # entered late: 0.5 s left, under every level
    assert route(final, LEVELS[0], LEVELS, entered + 16_800) == Wait(due)  # due within 1 s of entering: waits here
    # Due more than the smallest level after it entered it: entering it again, not a wait holding later records.
    early = record(moved.headers, timestamp=entered + 16_000)
    assert route(early, LEVELS[0], LEVELS, entered + 17_000) == Hop(LEVELS[0], entered)
    assert route(final, LEVELS[0], LEVELS, due) == Deliver("t", None, due, entered)  # the original timestamp
    # Acted on late in a longer level with less than the smallest level left: to the smallest level, not a wait there.
    assert route(moved, LEVELS[1], LEVELS, due - 500) == Hop(LEVELS[0], entered)


def test_route_holds_less_than_the_smallest_level_left_at_the_end_of_a_longer_level() -> None:
    entered = 1_000_000
    held = record(delay_headers("t", entered + 5_600), timestamp=entered)  # in the 5s level: 0.6 s left after it
    assert route(held, LEVELS[1], LEVELS, entered + 4_999) == Wait(entered + 5_600)
    assert route(held, LEVELS[1], LEVELS, entered + 5_600) == Deliver("t", None, entered + 5_600, entered)
    # A whole smallest level left after it: one more level, not a hold.
    moved = record(delay_headers("t", entered + 6_000), timestamp=entered)
    assert route(moved, LEVELS[1], LEVELS, entered + 5_000) == Hop(LEVELS[0], entered)
    # The smallest level holds nothing past its own end (it has no smaller level below it to stand for).
    last = record(delay_headers("t", entered + 1_600), timestamp=entered, topic="__delay-1s")
    assert route(last, LEVELS[0], LEVELS, entered + 1_000) == Hop(LEVELS[0], entered)


def simulate(levels_text: str, delays_ms: list[int], gap_ms: int) -> tuple[float, list[int]]:
    """The service's routing with forwards taking no time: one partition per level, a record with ``delays_ms[i]``
    produced every ``gap_ms`` into the level ``schedule`` picks; returns the records appended to the levels per
    record (1 + its moves between levels) and each delivery's lateness."""
    levels = parse_levels(levels_text)
    buffers = {level: PartitionBuffer(TopicPartition(level.topic, 0), 1 << 30) for level in levels}
    appended = 0
    late: list[int] = []

    def append(level, timestamp: int, headers) -> None:
        nonlocal appended
        appended += 1
        buffers[level].extend([record(headers, timestamp=timestamp, offset=appended, topic=level.topic)])

    now, produced = 0, 0
    while True:
        while produced < len(delays_ms) and produced * gap_ms <= now:
            delay = delays_ms[produced]
            append(choose_level(levels, delay) or levels[0], now, delay_headers("t", now + delay))
            produced += 1
        wakes = [produced * gap_ms] if produced < len(delays_ms) else []
        for level, buffer in buffers.items():
            taken, due = buffer.take_due(lambda r, lv=level, at=now: route(r, lv, levels, at), 1 << 30)
            for rec, action in taken:
                if isinstance(action, Deliver):
                    late.append(now - action.deliver_at_ms)
                else:
                    assert isinstance(action, Hop)
                    original = (ORIGINAL_TIMESTAMP_HEADER, str(action.timestamp_ms).encode())
                    append(action.level, now, [*(h for h in rec.headers if h[0] != original[0]), original])
                    wakes.append(now)  # the moved record may be due at once
            wakes += [] if due is None else [due]
        if not wakes:
            return appended / len(delays_ms), late
        now = max(min(wakes), now + (0 if min(wakes) > now else 1))


def test_records_are_never_early_and_late_by_less_than_the_smallest_level_in_few_moves() -> None:
    rng = random.Random(26)
    delays = [rng.randrange(1_000, 5_000) for _ in range(2_000)]
    per_record, late = simulate(DEFAULT_DELAY_LEVELS, delays, gap_ms=1)
    assert len(late) == len(delays) and min(late) >= 0 and max(late) < 250
    # Delays of 1-5 s took ~5 appends through 250ms,1s,5s,... with a last move to 250ms; now ~2.5.
    assert per_record < 3
    # Delays of whole levels: no move at all. 1.999 s: 1s, 500ms, 250ms, then 250ms again (0.249 s left).
    assert simulate(DEFAULT_DELAY_LEVELS, [2_000, 5_000, 60_000], gap_ms=1)[0] == 1
    assert simulate(DEFAULT_DELAY_LEVELS, [1_999], gap_ms=1)[0] == 4


def test_route_delivers_a_record_due_before_its_level_runs_out_at_its_due_time() -> None:
    rec = record(delay_headers("t", 1_000_300, partition=2), timestamp=1_000_000)
    assert route(rec, LEVELS[1], LEVELS, 1_000_299) == Wait(1_000_300)
    assert route(rec, LEVELS[1], LEVELS, 1_000_300) == Deliver("t", 2, 1_000_300, 1_000_000)


def test_route_dead_letters_bad_headers_and_expired_records_and_drops_cancelled_ones() -> None:
    assert route(record([(TARGET_HEADER, b"t")]), LEVELS[0], LEVELS, 0).reason == REASON_INVALID
    assert route(record([(DELIVER_AT_HEADER, b"12")]), LEVELS[0], LEVELS, 0).reason == REASON_INVALID
    bad = record([(DELIVER_AT_HEADER, b"soon"), (TARGET_HEADER, b"t")])
    assert isinstance(route(bad, LEVELS[0], LEVELS, 0), DeadLetter)
    ttl = record([*delay_headers("t", 1_010_000), (TTL_HEADER, b"2000")])
    assert route(ttl, LEVELS[1], LEVELS, 1_005_000).reason == REASON_TTL
    cancel = record([*delay_headers("t", 1_010_000, delay_id="order-7")])
    assert route(cancel, LEVELS[1], LEVELS, 1_005_000, {"order-7"}) == Cancelled("order-7")
    assert isinstance(route(cancel, LEVELS[1], LEVELS, 1_005_000, {"order-8"}), Hop)


def test_buffer_takes_due_heads_in_order_and_pauses_when_full() -> None:
    buffer = PartitionBuffer(TopicPartition("__delay-1s", 0), max_records=3)
    assert buffer.extend(record(delay_headers("t", due), offset=i) for i, due in enumerate([10, 20, 30, 40])) == 3
    assert buffer.full and len(buffer) == 3
    decide = lambda r: Wait(30) if r.offset == 2 else Deliver("t", None, 0, 0)  # noqa: E731
    taken, next_due = buffer.take_due(decide, limit=10)
    assert [r.offset for r, _ in taken] == [0, 1] and next_due == 30 and not buffer.full
    assert buffer.take_due(lambda r: Deliver("t", None, 0, 0), limit=0) == ([], None)


def test_schedule_picks_the_level_and_adds_the_contract_headers() -> None:
    topic, partition, headers, ts = schedule(LEVELS, "orders", 3, [("a", b"1")], 1_000, delay_ms=7_000, ttl_ms=50)
    assert topic == "__delay-5s" and partition is None and ts == 1_000
    assert dict(headers) == {
        "a": b"1",
        TTL_HEADER: b"50",
        DELIVER_AT_HEADER: b"8000",
        TARGET_HEADER: b"orders",
        "oncelog-delay-partition": b"3",
    }
    assert schedule(LEVELS, "orders", None, None, 1_000, delay_ms=300)[0] == "__delay-1s"
    assert schedule(LEVELS, "orders", 1, None, 1_000, deliver_at_ms=900) == ("orders", 1, [], None)
    with pytest.raises(ValueError):
        schedule(LEVELS, "orders", None, None, 1_000, delay_ms=1, deliver_at_ms=2)


def test_expired_counts_from_the_timestamp() -> None:
    assert not expired(1_000, [(TTL_HEADER, b"500")], 1_499)
    assert expired(1_000, [(TTL_HEADER, b"500")], 1_500)
    assert not expired(1_000, [(TTL_HEADER, b"x")], 10**12)
    assert not expired(1_000, [], 10**12)


def test_dead_letter_headers_follow_springs_names_and_encodings() -> None:
    rec = ConsumerRecord("orders", 2, 41, 1234, 0, b"k", b"v", [("a", b"1"), (REASON_HEADER, b"old")])
    headers = dead_letter_headers(rec, "ttl-expired", "too old", group_id="g")
    values = dict(headers)
    assert values["a"] == b"1" and values[REASON_HEADER] == b"ttl-expired"
    assert [k for k, _ in headers].count(REASON_HEADER) == 1
    assert struct.unpack(">i", values[DLT_ORIGINAL_PARTITION]) == (2,)
    assert struct.unpack(">q", values[DLT_ORIGINAL_OFFSET]) == (41,)
    assert values["kafka_dlt-original-topic"] == b"orders" and values["kafka_dlt-original-consumer-group"] == b"g"


def test_the_broker_creates_configured_delay_topics_only() -> None:
    config = BrokerConfig.from_sources({}, {"delay.levels": "1s,2s", "delay.topic.num.partitions": "3"}, {})
    assert delay_topic_spec(config, "__delay-2s") == (3, {})
    assert delay_topic_spec(config, "__delay-5s") is None
    assert delay_topic_spec(config, "__delay-cancel") == (1, {"cleanup.policy": "compact"})
    assert delay_topic_spec(config, "orders") is None


def test_expiry_filter_uses_the_header_else_the_topics_default() -> None:
    from oncelog.client.expiry import ExpiryFilter

    old = ConsumerRecord("t", 0, 0, 1_000, 0, None, b"old", [(TTL_HEADER, b"100")])
    young = ConsumerRecord("t", 0, 1, 1_000, 0, None, b"young", [(TTL_HEADER, b"100000")])
    bare = ConsumerRecord("t", 0, 2, 1_000, 0, None, b"bare", [])
    assert ExpiryFilter().split([old, young, bare], 2_000) == ([young, bare], [old])
    assert ExpiryFilter({"t": 500}).split([old, young, bare], 2_000) == ([young], [old, bare])
    assert ExpiryFilter({"t": 500}).split([bare], 1_499) == ([bare], [])


async def test_the_service_moves_records_only_to_levels_whose_topics_exist() -> None:
    """A level topic not created yet (its creation fails while brokers are away) is no move's target: the record
    goes to an existing level instead of waiting for that topic's creation (a forward that waited ~30 s)."""

    class Producers:
        async def open(self, tp: TopicPartition, producer: object) -> None:
            pass

    class AssignOnly:
        def assign(self, partitions: list[TopicPartition]) -> None:
            self.assigned = partitions

    levels = parse_levels("1s,4s")
    service = DelayService("127.0.0.1:9", levels, transactional_id="t")
    buffers: dict[TopicPartition, PartitionBuffer] = {}
    consumer = AssignOnly()
    await service._assign(consumer, Producers(), {"__delay-4s": 1}, buffers, [])
    assert consumer.assigned == [TopicPartition("__delay-4s", 0)]
    entered = 1_000_000
    buffers[TopicPartition("__delay-4s", 0)].extend(
        [record(delay_headers("t", entered + 6_000), timestamp=entered, topic="__delay-4s")]
    )
    service._clock_ms = lambda: entered + 4_000
    batch, _ = service._take_due(buffers)
    assert [action for _, action in batch[TopicPartition("__delay-4s", 0)]] == [Hop(levels[1], entered)]
    await service._assign(consumer, Producers(), {"__delay-4s": 1, "__delay-1s": 1}, buffers, [])
    buffers[TopicPartition("__delay-4s", 0)].extend(
        [record(delay_headers("t", entered + 6_000), timestamp=entered, topic="__delay-4s", offset=1)]
    )
    batch, _ = service._take_due(buffers)
    assert [action for _, action in batch[TopicPartition("__delay-4s", 0)]] == [Hop(levels[0], entered)]
