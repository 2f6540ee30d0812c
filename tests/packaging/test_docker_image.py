"""The Docker image, without Docker: its build stage's commands run here on a copy of the build context, its start
command and health check run from the environment they made, and a produce/consume round trip goes through it.

This is also the wheel's test: the wheel is built from only the files the Dockerfile copies, installed into a fresh
environment with no source tree on the path, and must hold every package folder of pyproject.toml's mapping.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import zipfile
from pathlib import Path

from support.dockerfile import Stage, build_context, exec_form, ignored, read_ignore, read_stages
from support.ports import can_connect, free_port

ROOT = Path(__file__).resolve().parents[2]
DOCKERFILE = ROOT / "Dockerfile"
#: The port and data dir the image uses; the test swaps in a free port and a temporary folder.
IMAGE_PORT = "9092"
IMAGE_DATA = "/data"
START_DEADLINE_S = 30.0


def package_dirs() -> dict[str, str]:
    """pyproject.toml's package-dir mapping: package name -> folder."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]


def package_folders() -> dict[str, Path]:
    """Every package the wheel must hold (a folder with __init__.py under a mapped folder) -> its folder."""
    found: dict[str, Path] = {}
    for name, folder in package_dirs().items():
        for init in sorted((ROOT / folder).rglob("__init__.py")):
            sub = init.parent.relative_to(ROOT / folder).parts
            if "__pycache__" not in sub:
                found[".".join((name, *sub))] = init.parent
    return found


def stages() -> tuple[Stage, Stage]:
    build, *_, final = read_stages(DOCKERFILE)
    return build, final


def copy_sources(build: Stage) -> list[tuple[list[str], str]]:
    """The build stage's ``COPY SRC... DEST`` from the build context (not ``--from`` another stage)."""
    result = []
    for args in build.all("COPY"):
        *sources, dest = args.split()
        assert not any(s.startswith("--") for s in sources), f"unexpected COPY option in {args!r}"
        result.append((sources, dest))
    return result


def uv_binary() -> str:
    """The uv that ``python3 dev.py`` uses (on PATH, or the one it keeps in .tools/)."""
    spec = importlib.util.spec_from_file_location("oncelog_dev", ROOT / "dev.py")
    assert spec is not None and spec.loader is not None
    dev = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(dev)
    return dev.uv()


def test_image_is_multi_stage_unprivileged_with_data_volume_and_healthcheck() -> None:
    build, final = stages()
    assert build.name and final.all("COPY") == [f"--from={build.name} /opt/oncelog /opt/oncelog"]
    assert final.last("USER") not in ("root", "0")
    assert final.all("VOLUME") == [IMAGE_DATA]
    assert "CMD" in final.last("HEALTHCHECK")
    entrypoint = exec_form(final.last("ENTRYPOINT"))
    assert entrypoint[:2] == ["oncelog", "broker"]
    assert entrypoint[entrypoint.index("--data-dir") + 1] == IMAGE_DATA


def test_every_package_folder_reaches_the_image() -> None:
    """Each file of each package folder is in the build context (.dockerignore) and under a COPY source, and so
    are the files setup.py needs to find the packages."""
    build, _ = stages()
    patterns = read_ignore(ROOT / ".dockerignore")
    # What is local to one machine stays out of the context (and so of the image).
    for local in (".venv/bin/python", ".tools/bin/uv", ".git/HEAD", "oncelog-data/meta", "broker/__pycache__/x.pyc"):
        assert ignored(local, patterns), local
    context = set(build_context(ROOT, patterns))
    copied = [source for sources, _ in copy_sources(build) for source in sources]
    for needed in ("pyproject.toml", "setup.py", "uv.lock", "README.md"):
        assert needed in copied and needed in context, needed
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    for name, folder in package_folders().items():
        rel = folder.relative_to(ROOT).as_posix()
        assert any(rel == s or rel.startswith(s + "/") for s in copied), f"{name} ({rel}/) is not COPYed"
        files = [f for f in tracked.splitlines() if f.startswith(rel + "/") and f.endswith(".py")]
        missing = [f for f in files if f not in context]
        assert files and not missing, f".dockerignore keeps {missing} of {name} out of the image"


def test_readme_gives_the_commands_the_image_runs() -> None:
    """README's Docker section shows the build stage's uv commands (run in the source tree with ``dev.py uv``) and the
    image's start command, so what the reader runs is what this file's round trip runs."""
    readme = (ROOT / "README.md").read_text()
    build, final = stages()
    for command in build.all("RUN"):
        if command.startswith("uv "):
            assert "python3 dev.py " + command.replace("/dist", "dist") in readme, command
    start = " ".join(exec_form(final.last("ENTRYPOINT")) + exec_form(final.last("CMD")))
    assert f"`{start}`" in readme
    assert (
        "docker build -t oncelog ." in readme and "docker run --rm -p 9092:9092 -v oncelog-data:/data oncelog" in readme
    )


def assemble_build_context(build: Stage, workdir: Path) -> None:
    """Copy what the build stage's COPY lines copy, from the build context, into ``workdir`` (its WORKDIR)."""
    context = build_context(ROOT, read_ignore(ROOT / ".dockerignore"))
    for sources, dest in copy_sources(build):
        for source in sources:
            files = [f for f in context if f == source or f.startswith(source + "/")]
            assert files, f"COPY {source}: nothing in the build context"
            for rel in files:
                target = workdir / dest / (Path(rel).name if rel == source else Path(rel).relative_to(source))
                if rel == source and not dest.endswith("/"):
                    target = workdir / dest
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / rel, target)


def outside_docker(command: str, tmp: Path) -> str:
    """An image path or port of ``command`` swapped for this test's."""
    return command.replace("/opt/oncelog", str(tmp / "opt")).replace("/dist", str(tmp / "dist"))


def test_wheel_built_installed_and_run_as_the_image_does(tmp_path: Path) -> None:
    build, final = stages()
    assert build.last("WORKDIR") == "/src"
    src = tmp_path / "src"
    assemble_build_context(build, src)
    uv = uv_binary()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(UV_PYTHON_DOWNLOADS="never", UV_PYTHON=sys.executable)
    for command in build.all("RUN"):
        if command.startswith("pip install") and command.split()[-1] == "uv":
            continue  # uv itself: here it is the one dev.py uses
        assert command.startswith("uv "), f"build step not reproduced here: {command}"
        subprocess.run(
            ["bash", "-c", f'"$UV" {outside_docker(command, tmp_path)[3:]}'],
            cwd=src,
            env={**env, "UV": uv},
            check=True,
            timeout=180,
        )

    # The wheel holds every package folder, each with its modules.
    (wheel,) = (tmp_path / "dist").glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for name, folder in package_folders().items():
        prefix = name.replace(".", "/") + "/"
        for module in folder.glob("*.py"):
            assert prefix + module.name in names, f"{prefix}{module.name} is not in {wheel.name}"

    # The environment imports oncelog from itself, not from a source tree.
    venv_bin = tmp_path / "opt" / "bin"
    run_env = {**env, "PATH": f"{venv_bin}{os.pathsep}{env.get('PATH', '')}"}
    where = subprocess.run(
        ["python", "-c", "import oncelog.broker.group, oncelog.protocol.sasl as m; print(m.__file__)"],
        cwd=tmp_path,
        env=run_env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    assert where.startswith(str(tmp_path / "opt")), where

    port = str(free_port())
    data = tmp_path / "data"
    data.mkdir()

    def localize(argv: list[str]) -> list[str]:
        return [
            str(data) if a == IMAGE_DATA else a.replace(f":{IMAGE_PORT}", f":{port}").replace("0.0.0.0", "127.0.0.1")
            for a in argv
        ]

    argv = localize(exec_form(final.last("ENTRYPOINT")) + exec_form(final.last("CMD")))
    health = localize(exec_form(final.last("HEALTHCHECK").split(" CMD ", 1)[1]))
    stderr = open(tmp_path / "broker.stderr", "wb")  # noqa: SIM115
    broker = subprocess.Popen(argv, cwd=tmp_path, env=run_env, stdin=subprocess.DEVNULL, stderr=stderr)
    try:
        deadline = START_DEADLINE_S
        while not can_connect("127.0.0.1", int(port)):
            assert broker.poll() is None, (tmp_path / "broker.stderr").read_text()
            deadline -= 0.1
            assert deadline > 0, "the broker did not listen"
            time.sleep(0.1)
        assert subprocess.run(health, cwd=tmp_path, env=run_env, capture_output=True).returncode == 0

        def cli(*args: str, stdin: str = "") -> str:
            done = subprocess.run(
                ["oncelog", *args, "--bootstrap-server", f"127.0.0.1:{port}"],
                cwd=tmp_path,
                env=run_env,
                input=stdin,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

        cli("topic", "create", "first-hour")
        cli("produce", "first-hour", stdin="one\ntwo\nthree\n")
        assert cli("consume", "first-hour", "--from-beginning", "--count", "3") == "one\ntwo\nthree\n"
    finally:
        broker.send_signal(signal.SIGTERM)
        try:
            code = broker.wait(30)
        finally:
            if broker.poll() is None:
                broker.kill()
                broker.wait()
            stderr.close()
    assert code == 0, (tmp_path / "broker.stderr").read_text()
