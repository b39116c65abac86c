"""Limits and ceilings are validated against what the engine and the ledger accept, at load time.

``1e20`` for memory, pids or tmpfs passed ``check`` and the engine refused
the run later (exit 6); ``cpus: 0.000001`` turned the CPU limit off (NanoCPUs below Docker's
0.01-CPU minimum); ``true`` was taken as 1; ``.inf`` in limits or ceilings was a traceback.
Each is now an input error at load (exit 2) naming the file, the line and the field. The
bounds and their sources: `runner.policy.models.LIMIT_BOUNDS`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.errors import InputError
from runner.ledger import Ceiling as LedgerCeiling
from runner.policy import load_policy
from runner.policy.models import LIMIT_BOUNDS
from runner.settings import Settings
from tests.support.paths import REPO

ROOT = REPO
SAFE = ROOT / "tests" / "fixtures" / "helpdesk" / "safe.yaml"

BAD_LIMITS = [
    ("memory_mb", "1e20"),
    ("memory_mb", "100000000000000000000"),
    ("pids_limit", "100000000000000000000"),
    ("pids_limit", "4194305"),  # above the kernel's PID_MAX_LIMIT: the engine's start fails
    ("tmpfs_mb", "100000000000000000000"),
    ("cpus", "0.000001"),  # rounds to NanoCPUs below 1e7: the limit would be off
    ("cpus", "0.009"),
    ("memory_mb", "true"),
    ("pids_limit", "true"),
    ("cpus", "true"),
    ("memory_mb", "512.0"),  # an integer field takes integers only
    ("timeout_s", ".inf"),
    ("timeout_s", ".nan"),
    ("timeout_s", "0"),
    ("timeout_s", "1e12"),  # past the host's timers (threading.TIMEOUT_MAX on Windows)
    ("cpus", ".inf"),
    ("max_calls", "0"),
    ("max_calls", "true"),
    ("max_trace_mb", "0"),
    ("max_trace_mb", ".inf"),
    ("max_trace_mb", "1e9"),
]


def _policy(tmp_path: Path, limits: str = "", ceilings: str = "") -> Path:
    path = tmp_path / "p.yaml"
    text = "name: p\nmode: shadow\n"
    if limits:
        text += f"limits:\n  timeout_s: 30\n{limits}"
    if ceilings:
        text += f"ceilings:\n  replay:\n{ceilings}"
    path.write_text(text)
    return path


@pytest.mark.parametrize(("name", "value"), BAD_LIMITS)
def test_a_limit_the_engine_would_refuse_is_an_input_error_at_load(
    tmp_path: Path, name: str, value: str
) -> None:
    path = _policy(tmp_path, f"  {name}: {value}\n" if name != "timeout_s" else "")
    if name == "timeout_s":
        path.write_text(f"name: p\nmode: shadow\nlimits:\n  memory_mb: 64\n  timeout_s: {value}\n")
    with pytest.raises(InputError) as info:
        load_policy(path)
    fields = info.value.fields
    assert (fields["file"], fields["line"], fields["field"]) == (str(path), 5, f"limits.{name}")


@pytest.mark.parametrize(
    ("dim", "value"),
    [
        ("usd", ".inf"),
        ("usd", ".nan"),
        ("sandbox_s", ".inf"),
        ("tokens", "1e30"),
        ("tokens", "100000000000000000000"),  # past SQLite's 64-bit integers
        ("runs", "true"),
        ("runs", "2.5"),
    ],
)
def test_a_ceiling_that_bounds_nothing_is_an_input_error(
    tmp_path: Path, dim: str, value: str
) -> None:
    path = _policy(tmp_path, ceilings=f"    {dim}: {value}\n")
    with pytest.raises(InputError) as info:
        load_policy(path)
    fields = info.value.fields
    assert (fields["line"], fields["field"]) == (5, f"ceilings.replay.{dim}")


def test_check_exits_2_naming_file_line_and_field(tmp_path: Path) -> None:
    path = _policy(tmp_path, "  memory_mb: 100000000000000000000\n")
    result = CliRunner().invoke(app, ["check", str(SAFE), "--policy", str(path)])
    assert result.exit_code == 2, result.output
    assert f"{path}:5: limits.memory_mb: 1e+20 is out of range" in result.stderr
    assert "Traceback" not in result.output


def test_check_json_names_the_field_of_a_bad_cpus(tmp_path: Path) -> None:
    path = _policy(tmp_path, "  cpus: 0.000001\n")
    result = CliRunner().invoke(app, ["check", str(SAFE), "--policy", str(path), "--json"])
    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert (data["file"], data["line"], data["field"]) == (str(path), 5, "limits.cpus")
    assert "0.01" in data["error"] and "NanoCPUs" in data["error"]


def test_the_limits_at_their_bounds_load(tmp_path: Path) -> None:
    lines = "".join(
        f"  {name}: {int(b.high) if name != 'cpus' else 0.01}\n"
        for name, b in LIMIT_BOUNDS.items()
        if name != "timeout_s"
    )
    policy = load_policy(_policy(tmp_path, lines))
    assert policy.limits.memory_mb == LIMIT_BOUNDS["memory_mb"].high
    assert policy.limits.cpus == 0.01


@pytest.mark.parametrize(
    ("env", "value"),
    [
        ("SANDBOX_REPLAY_MEMORY_MB", "100000000000000000000"),
        ("SANDBOX_REPLAY_CPUS", "0.000001"),
        ("SANDBOX_REPLAY_TIMEOUT_S", "inf"),
        ("SANDBOX_REPLAY_TIMEOUT_S", "nan"),
        ("SANDBOX_REPLAY_MAX_CALLS", "0"),
        ("SANDBOX_REPLAY_MAX_TRACE_MB", "-1"),
    ],
)
def test_setting_overrides_obey_the_same_bounds(env: str, value: str) -> None:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SANDBOX_REPLAY_")}
    environ[env] = value
    proc = subprocess.run(
        [sys.executable, "-m", "runner", "check", str(SAFE)],
        env=environ,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert env in proc.stderr and "Traceback" not in proc.stderr


def test_settings_take_the_new_limits() -> None:
    settings = Settings(max_calls=50, max_trace_mb=2)  # type: ignore[call-arg]
    assert (settings.max_calls, settings.max_trace_mb) == (50, 2)


@pytest.mark.parametrize(
    "values", [{"usd": float("inf")}, {"usd": float("nan")}, {"runs": True}, {"tokens": 2**64}]
)
def test_ceilings_from_flags_obey_the_same_rules(values: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        LedgerCeiling(**values)  # type: ignore[arg-type]


class _TwoCpuEngine:
    name = "two-cpus"

    def engine_cpus(self) -> float:
        return 2.0


def test_cpus_above_the_engines_are_refused_before_any_run(tmp_path: Path) -> None:
    from runner.episode.limits import check_engine_limits

    policy = load_policy(_policy(tmp_path, "  cpus: 3\n"))
    with pytest.raises(InputError) as info:
        check_engine_limits(_TwoCpuEngine(), policy, Settings())  # type: ignore[arg-type]
    assert info.value.fields["field"] == "limits.cpus" and info.value.exit_code == 2
    assert "Range of CPUs is from 0.01 to 2.00" in str(info.value)
    check_engine_limits(_TwoCpuEngine(), load_policy("shadow"), Settings())  # 1 CPU: fits
    with pytest.raises(InputError) as env:
        check_engine_limits(_TwoCpuEngine(), policy, Settings(cpus=2.5))  # type: ignore[arg-type]
    assert env.value.fields["field"] == "SANDBOX_REPLAY_CPUS"


def test_a_job_file_ceiling_of_inf_is_an_input_error(tmp_path: Path) -> None:
    from runner.submit.options import load_job_file

    job = tmp_path / "job.yaml"
    job.write_text("variants: [a.yaml]\ntasks: t.jsonl\nceilings:\n  replay:\n    usd: .inf\n")
    with pytest.raises(InputError) as info:
        load_job_file(job)
    assert (info.value.fields["line"], info.value.fields["field"]) == (5, "ceilings.replay.usd")


def test_a_ceiling_flag_of_inf_is_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SANDBOX_REPLAY_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.chdir(ROOT / "tests" / "fixtures" / "submit")
    result = CliRunner().invoke(
        app,
        [
            "submit",
            "--variant",
            "a.yaml",
            "--tasks",
            "tasks.jsonl",
            "--ceiling-usd",
            "inf",
            "--dry-run",
        ],
    )
    assert result.exit_code == 2 and "ceiling usd must be finite" in result.stderr
