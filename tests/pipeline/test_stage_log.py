"""``pipeline.stage_log``: one JSON line per stage when ONCELOG_SPARK_STAGE_LOG names a file, nothing otherwise."""

from __future__ import annotations

import json

import pytest
from oncelog.pipeline.stage_log import STAGE_LOG_ENV, stage


def test_a_stage_appends_one_line_with_its_fields(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "stages.jsonl"
    monkeypatch.setenv(STAGE_LOG_ENV, str(path))
    with stage("read", partition=3) as fields:
        fields["rows"] = 42
    with stage("commit"):
        pass
    with pytest.raises(RuntimeError), stage("write"):
        raise RuntimeError("a stage that raises records nothing")
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [(s["stage"], s.get("partition"), s.get("rows")) for s in lines] == [("read", 3, 42), ("commit", None, None)]
    assert all(s["end"] >= s["start"] and s["cpu"] >= 0 and s["pid"] > 0 for s in lines)


def test_without_the_variable_nothing_is_written(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STAGE_LOG_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    with stage("read") as fields:
        fields["rows"] = 1
    assert list(tmp_path.iterdir()) == []
