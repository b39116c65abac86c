"""The console script's basics: help, version, usage errors, quick start, no stray tracebacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from runner import __version__
from tests.support.paths import REPO

ROOT = REPO


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
        "import sys; import runner.cli.entry; "
        "heavy = [m for m in ('docker', 'requests', 'pydantic_settings', 'httpx') "
        "if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, f"imported at CLI start: {proc.stdout} {proc.stderr}"


def _log_once(fmt: str) -> str:
    code = (
        "import structlog; from runner.cli.log import configure_logging; "
        f"configure_logging({fmt!r}); "
        "structlog.get_logger('t').info('container_started', run_id='r1', start_s=0.2)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""  # logs never go to stdout (it carries command output)
    return proc.stderr.strip()


@pytest.mark.parametrize("fmt", ["json", "auto"])  # auto: stderr is not a TTY here -> JSON
def test_logs_are_json_when_asked_or_not_a_tty(fmt: str) -> None:
    import json

    record = json.loads(_log_once(fmt))
    assert record["event"] == "container_started" and record["run_id"] == "r1"
    assert record["level"] == "info" and "timestamp" in record


def test_console_logs_are_readable_lines() -> None:
    line = _log_once("console")
    assert "container_started" in line and "run_id=r1" in line and not line.startswith("{")


def test_invalid_setting_in_the_environment_is_named_exit_2() -> None:
    proc = run_cli("doctor", env={"SANDBOX_REPLAY_TIMEOUT_S": "abc"})
    assert proc.returncode == 2
    assert "SANDBOX_REPLAY_TIMEOUT_S" in proc.stderr and "'abc'" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["submit", "--workflow", "x", "--json"], "No such option: --workflow"),  # usage error
        (["report", "--json"], "Missing argument 'JOB_ID'"),
        (["report", "../x", "--json"], "JOB_ID: invalid job id"),  # the command's own error
        (["run", "--json", "nope.yaml", "--task", "t"], ""),
    ],
)
def test_with_json_every_error_is_one_json_object_on_stdout(
    args: list[str], says: str, tmp_path: object
) -> None:
    proc = run_cli(*args, env={"SANDBOX_REPLAY_STATE_DIR": str(tmp_path)})
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    body = json.loads(proc.stdout)  # one object, nothing else on stdout
    assert isinstance(body, dict) and body["exit_code"] == 2, body
    assert says in body["error"], body
    assert "Traceback" not in proc.stderr


def test_without_json_a_usage_error_stays_typer_s_usage_text() -> None:
    proc = run_cli("submit", "--workflow", "x")
    assert proc.returncode == 2 and proc.stdout == ""
    assert "No such option: --workflow" in proc.stderr and "Usage:" in proc.stderr
