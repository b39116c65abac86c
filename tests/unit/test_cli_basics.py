"""The console script's basics: help, version, usage errors, quick start, no stray tracebacks."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runner import __version__

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_help_lists_the_foundation_commands() -> None:
    proc = run_cli("--help")
    assert proc.returncode == 0, proc.stderr
    for command in ("doctor", "image"):
        assert command in proc.stdout


def test_image_help_lists_build_and_smoke() -> None:
    proc = run_cli("image", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "build" in proc.stdout and "smoke" in proc.stdout
    build = run_cli("image", "build", "--help")
    assert "--offline" in build.stdout


def test_version() -> None:
    proc = run_cli("--version")
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"sandbox-replay {__version__}"


@pytest.mark.parametrize(
    "args", [("no-such-command",), ("doctor", "--no-such-flag"), ("--log-format", "xml", "doctor")]
)
def test_usage_errors_exit_2_without_traceback(args: tuple[str, ...]) -> None:
    proc = run_cli(*args)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr + proc.stdout


def test_help_does_not_import_heavy_libraries() -> None:
    code = (
        "import sys; import runner.cli.app as a; a._register_commands(); "
        "heavy = [m for m in ('docker', 'requests', 'pydantic_settings', 'httpx') "
        "if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, f"imported at CLI start: {proc.stdout} {proc.stderr}"


def test_help_is_quick() -> None:
    best = min(_timed_help() for _ in range(3))
    assert best < 1.5, f"--help took {best:.2f} s"


def _timed_help() -> float:
    started = time.monotonic()
    proc = run_cli("--help")
    assert proc.returncode == 0
    return time.monotonic() - started
