"""The sandbox side of runner is mounted with its bytecode (`runner.episode.prepare`).

Sandboxes mount the packages read-only and run with ``PYTHONDONTWRITEBYTECODE``: without a
``__pycache__`` prepared by the host, every sandbox compiled every runtime module from source
(measured: ~100 ms of CPU per run). These tests pin that `runner_mounts` leaves a pyc
for every mounted source that Python's own timestamp check accepts, and refreshes it when the
source changes.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import struct
import sys
from pathlib import Path

import pytest

from runner import resources
from runner.episode import prepare
from runner.wire import protocol


def _copy_package(tmp_path: Path) -> Path:
    package = tmp_path / "runner"
    package.mkdir()
    shutil.copy2(resources.package_dir() / "__init__.py", package / "__init__.py")
    for name in protocol.SANDBOX_PACKAGES:
        shutil.copytree(
            resources.package_dir() / name,
            package / name,
            ignore=shutil.ignore_patterns("__pycache__"),
        )
    return package


def _pyc(source: Path) -> Path:
    tag = sys.implementation.cache_tag
    return source.parent / "__pycache__" / f"{source.stem}.{tag}.pyc"


def _fresh(source: Path) -> bool:
    """What the sandbox's importer checks (PEP 552 timestamp pyc): magic, mtime and size."""
    pyc = _pyc(source)
    if not pyc.is_file():
        return False
    header = pyc.read_bytes()[:16]
    stat = source.stat()
    expected = importlib.util.MAGIC_NUMBER + struct.pack(
        "<III", 0, int(stat.st_mtime) & 0xFFFFFFFF, stat.st_size & 0xFFFFFFFF
    )
    return header == expected


def _sources(package: Path) -> list[Path]:
    found: list[Path] = []  # runner/__init__.py is mounted alone, without a __pycache__
    for name in protocol.SANDBOX_PACKAGES:
        found += sorted(p for p in (package / name).rglob("*.py") if "__pycache__" not in p.parts)
    return found


def test_mounted_sources_come_with_fresh_bytecode(tmp_path: Path) -> None:
    package = _copy_package(tmp_path)
    sources = _sources(package)
    assert sources and not any(_fresh(s) for s in sources)
    mounts = prepare.runner_mounts(package)
    assert {m.source for m in mounts} == {package / "__init__.py"} | {
        package / name for name in protocol.SANDBOX_PACKAGES
    }
    stale = [str(s.relative_to(package)) for s in sources if not _fresh(s)]
    assert stale == []
    # the sitecustomize every Python child of the sandbox loads is among them
    assert _fresh(package / "runtime" / "egress" / "site" / "sitecustomize.py")


def test_a_changed_source_gets_its_bytecode_again(tmp_path: Path) -> None:
    package = _copy_package(tmp_path)
    prepare.compile_sandbox_packages(package)
    source = package / "runtime" / "watchdog.py"
    source.write_text(source.read_text() + "\nCHANGED = 1\n")
    os.utime(source, (source.stat().st_atime, source.stat().st_mtime + 5))
    assert not _fresh(source)  # the sandbox would compile it from source again
    prepare.compile_sandbox_packages(package)
    assert _fresh(source)


def test_a_package_python_cannot_write_to_still_mounts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _copy_package(tmp_path)

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise PermissionError("read-only")

    monkeypatch.setattr(prepare.py_compile, "compile", refuse)
    assert prepare.compile_sandbox_packages(package) is False
    assert len(prepare.runner_mounts(package)) == 1 + len(protocol.SANDBOX_PACKAGES)


def test_bytecode_goes_beside_the_source_whatever_the_hosts_pycache_prefix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host with ``PYTHONPYCACHEPREFIX`` would write elsewhere: the sandbox looks beside it."""
    package = _copy_package(tmp_path)
    monkeypatch.setattr(sys, "pycache_prefix", str(tmp_path / "elsewhere"))
    prepare.compile_sandbox_packages(package)
    assert _fresh(package / "runtime" / "main.py")
    assert not (tmp_path / "elsewhere").exists()
