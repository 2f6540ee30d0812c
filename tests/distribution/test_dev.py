"""``python3 dev.py``: a sync keeps the extras an earlier command installed; ``dev.py uv`` runs its uv."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


def load_dev() -> ModuleType:
    spec = importlib.util.spec_from_file_location("oncelog_dev", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    return dev


def fake_venv(root: Path, distributions: list[str]) -> Path:
    site = root / "lib" / "python3.11" / "site-packages"
    for dist in distributions:
        (site / f"{dist}.dist-info").mkdir(parents=True)
    return root


def test_broker_sync_keeps_the_extras_test_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dev = load_dev()
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    # Every requirement of the test extra installed (wheel names use underscores: pytest_trio, confluent_kafka).
    test_dists = [f"{req.split('>')[0].split('[')[0].replace('-', '_')}-1.0" for req in optional["test"]]
    monkeypatch.setattr(dev, "VENV", fake_venv(tmp_path / "venv", ["trio-0.27.0", *test_dists]))
    commands: list[list[str]] = []
    monkeypatch.setattr(dev, "uv", lambda: "uv")
    monkeypatch.setattr(dev, "run", lambda cmd, **_: commands.append(cmd))
    dev.sync([])  # what `python3 dev.py broker` runs
    # spark's two packages are in test too, so it counts as installed; bench's are not.
    assert commands == [
        ["uv", "sync", "--frozen", "--quiet", "--compile-bytecode", "--extra", "spark", "--extra", "test"]
    ]


def test_a_partly_installed_extra_is_not_added(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dev = load_dev()
    monkeypatch.setattr(dev, "VENV", fake_venv(tmp_path / "venv", ["matplotlib-3.9.0"]))
    assert dev.installed_extras() == set()


def test_dev_uv_runs_the_uv_dev_uses() -> None:
    """``python3 dev.py uv ...``, which README's wheel commands use, passes its arguments to that uv."""
    done = subprocess.run([sys.executable, str(ROOT / "dev.py"), "uv", "--version"], capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.startswith("uv "), done.stderr
