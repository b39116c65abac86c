"""The runtime's hello environment: packages as importlib.metadata lists them, a cheap start.

`runner.runtime.environment.installed_packages` replaces ``importlib.metadata`` on the run's
start path (about 30 ms of CPU per sandboxed run): it must list the same distributions, and the
runtime must not import the heavy modules it was written to avoid.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

from runner.runtime.environment import environment_platform, installed_packages
from tests.support.paths import REPO

ROOT = REPO
PY39 = "/root/.pyenv/versions/3.9.18/bin/python"


def _metadata_way(paths: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions(path=paths):
        name = dist.metadata["Name"]
        if name and name not in found:
            found[str(name)] = str(dist.version)
    return dict(sorted(found.items()))


def _site(tmp_path: Path) -> tuple[Path, Path]:
    first, second = tmp_path / "site1", tmp_path / "site2"
    for folder in (first, second):
        folder.mkdir()
    (first / "PyYAML-6.0.1.dist-info").mkdir()
    (first / "PyYAML-6.0.1.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: PyYAML\nVersion: 6.0.1\nSummary: x\n\nbody: Name: no\n"
    )
    (first / "pydantic_settings-2.1.0.dist-info").mkdir()
    (first / "pydantic_settings-2.1.0.dist-info" / "METADATA").write_text(
        "Metadata-Version: 2.3\nName: pydantic-settings\nVersion: 2.1.0\n"
    )
    (first / "chardet-4.0.0.egg-info").mkdir()  # Debian's python3-* packages
    (first / "chardet-4.0.0.egg-info" / "PKG-INFO").write_text(
        "Metadata-Version: 1.1\nName: chardet\nVersion: 4.0.0\n"
    )
    (first / "oldstyle-0.1-py3.9.egg-info").write_text(  # distutils: the file itself
        "Metadata-Version: 1.0\nName: oldstyle\nVersion: 0.1\n"
    )
    (first / "not_a_dist").mkdir()
    (second / "PyYAML-5.0.dist-info").mkdir()  # shadowed by the first path entry
    (second / "PyYAML-5.0.dist-info" / "METADATA").write_text("Name: PyYAML\nVersion: 5.0\n")
    (second / "six-1.16.0.dist-info").mkdir()
    (second / "six-1.16.0.dist-info" / "METADATA").write_text("Name: six\nVersion: 1.16.0\n")
    return first, second


def test_packages_are_what_importlib_metadata_lists(tmp_path: Path) -> None:
    first, second = _site(tmp_path)
    paths = [str(first), str(tmp_path / "missing"), str(tmp_path / "file.zip"), str(second)]
    (tmp_path / "file.zip").write_bytes(b"not a zip")
    expected = _metadata_way(paths)
    assert expected == {
        "PyYAML": "6.0.1",
        "chardet": "4.0.0",
        "oldstyle": "0.1",
        "pydantic-settings": "2.1.0",
        "six": "1.16.0",
    }
    assert installed_packages(paths) == expected
    assert list(installed_packages(paths)) == sorted(expected)


def test_the_interpreters_own_packages_match_importlib_metadata() -> None:
    assert installed_packages() == _metadata_way(sys.path)


def test_a_dist_info_without_metadata_falls_back_to_its_folder_name(tmp_path: Path) -> None:
    (tmp_path / "broken-1.2.dist-info").mkdir()
    (tmp_path / "noversion.egg-info").mkdir()
    assert installed_packages([str(tmp_path)]) == {"broken": "1.2"}


def test_platform_names_os_machine_and_libc_like_platform_libc_ver() -> None:
    libc, version = platform.libc_ver()
    expected = "-".join(
        [sys.platform, platform.machine() or "unknown"] + ([libc + version] if libc else [])
    )
    assert environment_platform() == expected


@pytest.mark.parametrize("python", [sys.executable, PY39])
def test_the_runtime_start_path_imports_none_of_the_heavy_modules(python: str) -> None:
    if not os.path.exists(python):
        pytest.skip(f"{python} is not installed")
    heavy = [
        "importlib.metadata",
        "email",
        "zipfile",
        "tempfile",
        "platform",
        "asyncio",
        "http",
        # not ctypes: every run needs it (the egress witness's seccomp calls, the clock's patch)
        "traceback",
        "pathlib",
        # the SDK's tool decoration needs inspect (with ast, dis, tokenize): the worker's, never
        # the runtime's (~7 ms of CPU per sandbox)
        "inspect",
        "ast",
        "dis",
        "tokenize",
    ]
    code = (
        "import sys\n"
        "import runner.runtime.main\n"
        f"print(','.join(m for m in {heavy!r} if m in sys.modules))\n"
    )
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [python, "-S", "-c", code], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"imported on the start path: {proc.stdout.strip()}"


def test_the_child_log_goes_to_tmpdir_without_importing_tempfile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tempfile

    from runner.runtime.egress import childlog

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    assert childlog._temp_dir() == str(tmp_path)
    log = childlog.ChildLog()
    assert os.path.dirname(log.path) == str(tmp_path) and os.path.exists(log.path)
    monkeypatch.setenv("TMPDIR", str(tmp_path / "missing"))
    assert childlog._temp_dir() == tempfile.gettempdir()  # the general answer, as before


@pytest.mark.parametrize("python", [sys.executable, PY39])
def test_a_python_childs_sitecustomize_imports_no_importlib_util_without_a_shadowed_one(
    python: str, tmp_path: Path
) -> None:
    """Every Python child of a sandbox (the worker first) runs it: only what it needs."""
    if not os.path.exists(python):
        pytest.skip(f"{python} is not installed")
    from runner.runtime.egress.audit import SITE_DIR

    code = (
        "import sys\n"
        f"sys.path[:0] = [{SITE_DIR!r}, {str(ROOT)!r}]\n"
        "import sitecustomize\n"
        "assert sitecustomize.__file__.startswith(sys.path[0]), sitecustomize.__file__\n"
        "print(','.join(m for m in ('importlib.util', 'inspect') if m in sys.modules))\n"
    )
    env = {
        "PATH": os.environ.get("PATH", ""),
        "SANDBOX_REPLAY_EGRESS_LOG": str(tmp_path / "egress.log"),
        "SANDBOX_REPLAY_CLOCK": "1767225600.0",
    }
    proc = subprocess.run(
        [python, "-S", "-c", code], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"imported at a child's start: {proc.stdout.strip()}"
