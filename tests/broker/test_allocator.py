"""The broker's fixed malloc thresholds: 1 MB request buffers reuse warm heap pages instead of faulting in new ones."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

# Eight 1 MiB buffers at once, as eight pipelined 1 MB Produce requests hold, allocated and freed 20 times after a
# warm-up; prints the page faults those 20 rounds took.
_ROUNDS = textwrap.dedent(
    """
    import resource, sys
    if sys.argv[1] == "fixed":
        from oncelog.broker.allocator import fix_malloc_thresholds
        assert fix_malloc_thresholds()
    def rounds(n):
        for _ in range(n):
            buffers = [bytearray(1 << 20) for _ in range(8)]
            del buffers
    rounds(3)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    rounds(20)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    """
)


def _faults(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", _ROUNDS, mode], env=env, capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_fixed_thresholds_keep_request_sized_buffers_warm() -> None:
    default = _faults("default")
    fixed = _faults("fixed")
    # glibc's moving thresholds return the freed 8 MiB to the kernel every round (~2,000 faults a round here).
    assert default > 20 * 1000
    assert fixed < 200


def test_environment_settings_win(monkeypatch: pytest.MonkeyPatch) -> None:
    from oncelog.broker.allocator import fix_malloc_thresholds

    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1048576")
    assert not fix_malloc_thresholds()
