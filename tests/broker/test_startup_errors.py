"""The common ways a broker fails to start print one line naming the cause (no traceback) and exit with the
documented code: a port in use, a data dir that is a file, read-only, full or in use by another broker, bad TLS
files, an unknown property."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from oncelog.broker.cli import EXIT_CONFIG_ERROR, EXIT_STARTUP_FAILED
from support.broker import BrokerProcess

ONCELOG = str(Path(sys.executable).with_name("oncelog"))
#: Start-up info lines may come before the error (config loaded, logs recovered): a handful, never a traceback.
MAX_STDERR_LINES = 6


def start(*args: str, prefix: tuple[str, ...] = ()) -> tuple[int, str]:
    done = subprocess.run(
        [*prefix, ONCELOG, "broker", *args], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
    )
    return done.returncode, done.stderr


def assert_one_line_error(stderr: str, expected: str) -> None:
    lines = stderr.strip().splitlines()
    assert "Traceback" not in stderr and len(lines) <= MAX_STDERR_LINES, stderr
    assert lines[-1] == f"oncelog: {expected}", stderr


def test_port_in_use_names_the_listener_and_address(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        code, stderr = start("--data-dir", str(tmp_path / "d"), "--listen", f"127.0.0.1:{port}")
    assert code == EXIT_STARTUP_FAILED
    assert_one_line_error(stderr, f"listener PLAINTEXT cannot listen on 127.0.0.1:{port} (Address already in use)")


def test_second_broker_on_the_same_data_dir(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "d") as first:
        code, stderr = start("--data-dir", str(first.data_dir), "--listen", "127.0.0.1:0")
        assert code == EXIT_STARTUP_FAILED
        assert_one_line_error(
            stderr,
            f"data dir {first.data_dir} is in use by another broker (process {first.pid} holds "
            f"{first.data_dir / '.lock'})",
        )
    # Stopped, the first broker's lock is gone: the dir starts again.
    with BrokerProcess(tmp_path / "d"):
        pass


def test_data_dir_that_is_a_file(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_text("")
    code, stderr = start("--data-dir", str(path), "--listen", "127.0.0.1:0")
    assert code == EXIT_STARTUP_FAILED
    assert_one_line_error(stderr, f"data dir {path} is not a directory")


def in_own_tmpfs(data_dir: Path, options: str, fill: bool) -> tuple[str, ...]:
    """A command prefix that runs the broker in its own mount namespace with a tmpfs on ``data_dir`` (nothing is
    mounted outside it, and the mount goes with the process)."""
    data_dir.mkdir()
    mount = f"mount -t tmpfs -o {options} tmpfs {data_dir}"
    if fill:
        mount += f" && (head -c 1048576 /dev/zero > {data_dir}/filler 2>/dev/null; true)"
    unshare = ["unshare", "-m"] if os.geteuid() == 0 else ["unshare", "-r", "-m"]
    return (*unshare, "sh", "-c", f'{mount} && exec "$0" "$@"')


@pytest.mark.parametrize(
    ("options", "fill", "reason"),
    [("size=64k", True, "is full (No space left on device)"), ("ro", False, "is not usable (Read-only file system)")],
)
def test_full_or_read_only_data_dir(tmp_path: Path, options: str, fill: bool, reason: str) -> None:
    data = tmp_path / "d"
    code, stderr = start("--data-dir", str(data), "--listen", "127.0.0.1:0", prefix=in_own_tmpfs(data, options, fill))
    assert code == EXIT_STARTUP_FAILED
    assert_one_line_error(stderr, f"data dir {data} {reason}")


def test_bad_tls_files(tmp_path: Path) -> None:
    garbage = tmp_path / "broker.pem"
    garbage.write_text("not a certificate\n")
    tls = ("--listen", "SSL://127.0.0.1:0", "--set", "ssl.keystore.type=PEM")
    code, stderr = start("--data-dir", str(tmp_path / "d"), *tls, "--set", f"ssl.keystore.location={garbage}")
    assert code == EXIT_CONFIG_ERROR
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr, stderr
    assert stderr.startswith(f"oncelog: ssl.keystore.location {garbage}: cannot load the private key"), stderr
    missing = tmp_path / "missing.pem"
    code, stderr = start("--data-dir", str(tmp_path / "d"), *tls, "--set", f"ssl.keystore.location={missing}")
    assert code == EXIT_CONFIG_ERROR
    assert stderr == f"oncelog: ssl.keystore.location: cannot read {missing}: No such file or directory\n"


def test_unknown_property_suggests_the_kafka_name(tmp_path: Path) -> None:
    code, stderr = start("--data-dir", str(tmp_path / "d"), "--set", "log.retention.hour=1")
    assert code == EXIT_CONFIG_ERROR
    assert stderr == "oncelog: unknown property 'log.retention.hour' (did you mean 'log.retention.hours'?)\n"
