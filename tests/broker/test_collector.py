"""The cyclic collector's settings while serving (``broker.collector``): decoding, answering and freeing a request of
90,000 elements sets off no full collection and at most a young one, so it holds the event loop for no collector pass
over the whole heap (issue 23's soak measured 30-75 ms per full pass at CPython's defaults)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent(
    """
    import gc, sys
    sys.path.insert(0, "tests")
    from oncelog.broker.collector import settle_collector
    from oncelog.protocol import decode_request, decode_request_header
    from support.hostile import metadata_of_empty_names

    frame = metadata_of_empty_names(90_000)[4:]
    header = decode_request_header(frame)
    if sys.argv[1] == "settled":
        settle_collector()
    else:
        gc.collect()
        gc.freeze()
    collections = [0, 0, 0]
    gc.callbacks.append(lambda phase, info: phase == "start" and collections.__setitem__(
        info["generation"], collections[info["generation"]] + 1))
    for _ in range(3):
        body = decode_request(header, frame)
        assert len(body.topics) == 90_000
        del body
    print(*collections)
    """
)


def _collections(mode: str) -> list[int]:
    out = subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, check=True)
    return [int(n) for n in out.stdout.split()]


def test_a_large_request_sets_off_no_full_collection_once_settled() -> None:
    young, middle, full = _collections("settled")
    assert full == 0
    assert young + middle <= 6  # at most one per decode of 90,000 objects, against the 50,000 threshold


def test_at_cpythons_defaults_it_does() -> None:
    """The measurement the settings rest on: with the defaults, the same decodes run hundreds of young collections
    (each promoting the request's objects) and full ones."""
    young, _middle, full = _collections("defaults")
    assert young > 100
    assert full >= 1
