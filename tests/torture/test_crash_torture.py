"""CI form of the crash torture (``crash_torture.py``): ~5k records copied transactionally through 6 SIGKILLs, three
of them at named fault points, in well under a minute."""

from __future__ import annotations

from pathlib import Path

from crash_torture import torture


def test_transactional_copy_survives_kills(tmp_path: Path) -> None:
    result = torture(tmp_path / "data", records=5000, kills=6, txn_records=100, seed=3)
    stats = result.stats
    print(
        f"crash torture: {result.records} records, {stats.kills} kills, fault points {stats.fault_kills}, "
        f"{stats.commits} commits, {stats.copier_crashes} copier crashes, {result.seconds:.1f}s"
    )
    assert result.committed == result.records
    assert stats.kills >= 6
    assert sum(stats.fault_kills.values()) == 3 and not stats.faults_not_reached
    assert stats.commits >= 5000 // 100
