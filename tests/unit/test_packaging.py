"""`pip install` gives a working tool outside the repository: the wheel carries the default
policies and the sandbox image's build context, and `runner.resources` finds them there."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    try:
        import hatchling  # noqa: F401

        isolation = ["--no-build-isolation"]
    except ImportError:  # pragma: no cover - dev extras not installed: let pip fetch it
        isolation = []
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            *isolation,
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    wheels = list(out.glob("sandbox_replay-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_carries_dockerfile_script_and_policies(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "runner/_data/images/Dockerfile" in names
    assert "runner/_data/images/build-base-offline.sh" in names
    policies = {n for n in names if n.startswith("runner/_data/policies/")}
    on_disk = {f"runner/_data/policies/{p.name}" for p in (ROOT / "policies").glob("*.yaml")}
    assert policies >= on_disk
    for expected in ("shadow.yaml", "reproduce.yaml"):
        if (ROOT / "policies" / expected).exists():
            assert f"runner/_data/policies/{expected}" in names
    # the HTML report's templates, style and script (read from the package at run time)
    templates = {n for n in names if n.startswith("runner/cli/html/templates/")}
    on_disk = {
        f"runner/cli/html/templates/{p.name}"
        for p in (ROOT / "runner" / "cli" / "html" / "templates").iterdir()
    }
    assert templates == on_disk and "runner/cli/html/templates/report.js" in templates


def test_wheel_has_the_console_script_and_runtime(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "sandbox-replay = runner.cli.entry:main" in zf.read(entry_points).decode()
    assert "runner/runtime/protocol.py" in names and "runner/sdk/__init__.py" in names


def test_installed_wheel_finds_its_packaged_data(wheel: Path, tmp_path: Path) -> None:
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as zf:
        zf.extractall(target)
    code = (
        "import runner.resources as r; "
        "print(r.images_dir()); print(r.policies_dir()); print(r.package_dir())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(target)},
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    images, policies, package = (Path(line) for line in proc.stdout.split())
    assert images == target / "runner" / "_data" / "images"
    assert (images / "Dockerfile").is_file()
    assert policies == target / "runner" / "_data" / "policies"
    assert package == target / "runner"
