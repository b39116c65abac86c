"""`pip install` gives a working tool outside the repository: the wheel carries the default
policies and the sandbox image's build context, and `runner.resources` finds them there."""

from __future__ import annotations

import os
import shutil
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
    templates = {n for n in names if n.startswith("runner/cli/render/html/templates/")}
    on_disk = {
        f"runner/cli/render/html/templates/{p.name}"
        for p in (ROOT / "runner" / "cli" / "render" / "html" / "templates").iterdir()
    }
    assert templates == on_disk and "runner/cli/render/html/templates/report.js" in templates


def test_wheel_has_the_console_script_and_runtime(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "sandbox-replay = runner.cli.entry:main" in zf.read(entry_points).decode()
    assert "runner/wire/protocol.py" in names and "runner/sdk/__init__.py" in names


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


# -- a light install ----------------------------------------------------------------

CORE_MAX_DISTRIBUTIONS = 40  # the core install's bar for `pip install .` (31 when it was set)
HEAVY = ("ray", "openai", "anthropic", "openai-agents", "opentelemetry-sdk", "pytest", "mypy")


def _closure(requirements: list[str]) -> set[str]:
    """The distributions ``requirements`` pull in, from this environment's installed metadata."""
    import importlib.metadata as md

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: set[str] = set()
    todo = [Requirement(r) for r in requirements]
    while todo:
        req = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = canonicalize_name(req.name)
        if name in seen:
            continue
        seen.add(name)
        todo += [Requirement(r) for r in md.requires(req.name) or []]
    return seen


def test_the_core_install_stays_small_and_has_no_extra() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = _closure(project["dependencies"])
    assert len(core) + 1 <= CORE_MAX_DISTRIBUTIONS, sorted(core)  # + sandbox-replay itself
    assert not core & set(HEAVY), sorted(core & set(HEAVY))
    extras = project["optional-dependencies"]
    assert {"ray", "sdks", "otel-instrumentation", "dev"} <= set(extras)
    assert any(r.startswith("ray") for r in extras["ray"])


def _make_dry_run(target: str) -> str:
    make = shutil.which("make")
    if make is None:
        pytest.skip("no make on this host")
    proc = subprocess.run(
        [make, "-n", "-B", "--no-print-directory", target, "PYTHON=python3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout


def test_make_demo_installs_the_core_only_and_make_test_the_extras() -> None:
    demo = [line for line in _make_dry_run("demo").splitlines() if "pip install" in line]
    assert demo == [".venv/bin/python -m pip install -q -e ."], demo
    test = [line for line in _make_dry_run("test").splitlines() if "pip install" in line]
    assert any(
        "-e '.[dev,sdks,otel-instrumentation,ray,inspect-tests]'" in line for line in test
    ), test
