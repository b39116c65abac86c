"""`sandbox-replay doctor` against the real engine, and against an engine that is not there."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def doctor(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runner", "doctor", *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, **env},
        check=False,
    )


@pytest.mark.docker
def test_doctor_passes_on_a_machine_with_the_engine(docker_client: Any, sandbox_image: str) -> None:
    proc = doctor(SANDBOX_REPLAY_IMAGE=sandbox_image)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    for name in ("engine", "image", "python", "hardening", "network", "userns"):
        assert any(line.split()[1:2] == [name] for line in lines), (name, proc.stdout)
    assert "ENETUNREACH" in proc.stdout
    assert "Traceback" not in proc.stderr


@pytest.mark.docker
def test_doctor_json_reports_every_check(docker_client: Any, sandbox_image: str) -> None:
    proc = doctor("--json", SANDBOX_REPLAY_IMAGE=sandbox_image)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["ok"] is True
    checks = {c["name"]: c for c in report["checks"]}
    assert {"engine", "image", "python", "hardening", "network", "userns"} <= set(checks)
    assert all(c["ok"] for c in checks.values() if c["required"])
    assert checks["userns"]["required"] is False
    assert "API" in checks["engine"]["detail"]
    # the seccomp egress witness, probed in a sandbox (Docker's default profile)
    assert checks["witness"]["required"] is False
    assert checks["witness"]["ok"] is True, checks["witness"]


@pytest.mark.docker
def test_doctor_fails_with_fix_when_the_image_is_missing(docker_client: Any) -> None:
    proc = doctor(SANDBOX_REPLAY_IMAGE="sandbox-replay-test:no-such-image")
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "sandbox-replay image build --offline" in proc.stdout
    assert "Traceback" not in proc.stderr


def test_bad_docker_host_is_the_failed_engine_check_with_its_fix_and_exit_6() -> None:
    proc = doctor(DOCKER_HOST="unix:///nonexistent.sock")
    assert proc.returncode == 6
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("FAIL  engine") and "unix:///nonexistent.sock" in lines[0]
    assert "fix:" in lines[1] and "systemctl start docker" in lines[1], proc.stdout
    assert any("not run" in line for line in lines[2:])  # the checks that need the engine
    assert "Traceback" not in proc.stderr


def test_bad_docker_host_json() -> None:
    proc = doctor("--json", DOCKER_HOST="unix:///nonexistent.sock")
    assert proc.returncode == 6
    report = json.loads(proc.stdout)
    assert report["ok"] is False
    assert "unix:///nonexistent.sock" in report["checks"][0]["detail"]
    assert report["checks"][0]["fix"]


@pytest.mark.docker
def test_doctor_namespace_backend_checks_bwrap_userns_cgroups_and_the_probe(
    bwrap_usable: str, sandbox_image: str, tmp_path: Path
) -> None:
    """--backend namespace (here through SANDBOX_REPLAY_BACKEND): bwrap's own checks and probe."""
    proc = doctor(
        "--json",
        SANDBOX_REPLAY_IMAGE=sandbox_image,
        SANDBOX_REPLAY_BACKEND="namespace",
        SANDBOX_REPLAY_STATE_DIR=str(tmp_path / "state"),
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert {"bwrap", "userns", "cgroups", "rootfs", "hardening", "network"} <= set(checks)
    assert "engine" not in checks  # the engine's own checks are the Docker backend's
    assert "ENETUNREACH" in checks["network"]["detail"]
    assert checks["hardening"]["ok"] and checks["cgroups"]["required"] is False


def test_doctor_namespace_backend_without_bwrap_fails_with_the_install_fix(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # a PATH with python but no bwrap
    bin_dir.mkdir()
    (bin_dir / "python3").symlink_to(sys.executable)
    proc = doctor("--backend", "namespace", PATH=str(bin_dir))
    assert proc.returncode == 6, proc.stdout + proc.stderr
    assert "bwrap" in proc.stdout and "apt-get install -y bubblewrap" in proc.stdout
    assert "Traceback" not in proc.stderr
