"""Time decode+encode of a typical Produce request and Fetch response, compiled vs interpreted constructs.

Run: ``.venv/bin/python bench/codec_bench.py``. Prints microseconds per decode+encode round.
"""

from __future__ import annotations

import os
import timeit

from oncelog.protocol import SCHEMAS, ApiKey, decode_request, decode_request_header, encode_request
from oncelog.protocol.primitives import Reader

RECORDS = os.urandom(16 * 1024)

PRODUCE = {
    "transactional_id": None,
    "acks": -1,
    "timeout_ms": 30000,
    "topic_data": [{"name": "events", "partition_data": [{"index": 0, "records": RECORDS}]}],
}

FETCH = {
    "throttle_time_ms": 0,
    "error_code": 0,
    "session_id": 0,
    "responses": [
        {
            "topic": "events",
            "partitions": [
                {
                    "partition_index": p,
                    "error_code": 0,
                    "high_watermark": 1000,
                    "last_stable_offset": 1000,
                    "log_start_offset": 0,
                    "aborted_transactions": None,
                    "preferred_read_replica": -1,
                    "records": RECORDS,
                }
                for p in range(4)
            ],
        }
    ],
}


def _round(message: object, version: int, body: dict, compiled: bool) -> float:
    c = message.construct(version, compiled=compiled)
    data = c.build(body)

    def once() -> None:
        decoded = c.parse_stream(Reader(data))
        c.build(decoded)

    n, _ = timeit.Timer(once).autorange()
    best = min(timeit.Timer(once).repeat(repeat=5, number=n)) / n
    return best * 1e6


def main() -> None:
    """Print the figures."""
    cases = [
        ("Produce v9 request (1 topic, 1 partition, 16 KiB)", SCHEMAS[ApiKey.PRODUCE][0], 9, PRODUCE),
        ("Produce v3 request (1 topic, 1 partition, 16 KiB)", SCHEMAS[ApiKey.PRODUCE][0], 3, PRODUCE),
        ("Fetch v12 response (1 topic, 4 partitions x 16 KiB)", SCHEMAS[ApiKey.FETCH][1], 12, FETCH),
        ("Fetch v11 response (1 topic, 4 partitions x 16 KiB)", SCHEMAS[ApiKey.FETCH][1], 11, FETCH),
    ]
    print(f"{'case':55} {'compiled us':>12} {'interpreted us':>15} {'speedup':>8}")
    for name, message, version, body in cases:
        fast = _round(message, version, body, True)
        slow = _round(message, version, body, False)
        print(f"{name:55} {fast:12.1f} {slow:15.1f} {slow / fast:7.1f}x")
    frame = encode_request(ApiKey.PRODUCE, 9, 1, "bench", PRODUCE)

    def full() -> None:
        decode_request(decode_request_header(frame), frame)

    n, _ = timeit.Timer(full).autorange()
    best = min(timeit.Timer(full).repeat(repeat=5, number=n)) / n
    print(f"{'full decode_request_header+decode_request, Produce v9':55} {best * 1e6:12.1f}")


if __name__ == "__main__":
    main()
