"""doctor --backend namespace: a missing bwrap or user namespace fails with its fix."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from runner.backends.namespace import checks as C


def test_no_bwrap_fails_the_required_check_with_the_install_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    results = C.namespace_checks(tmp_path, "img", None)
    assert [(c.name, c.ok, c.ran) for c in results] == [
        ("bwrap", False, True),
        ("userns", False, False),
        ("rootfs", False, False),
    ]
    assert "bubblewrap" in results[0].fix


def test_no_user_namespaces_fails_with_the_sysctl_fix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: "/usr/bin/bwrap")

    def fake_run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if "--version" in argv:
            return subprocess.CompletedProcess(argv, 0, "bubblewrap 0.8.0\n", "")
        return subprocess.CompletedProcess(argv, 1, "", "bwrap: No permissions to create user ns")

    monkeypatch.setattr(subprocess, "run", fake_run)
    results = {c.name: c for c in C.namespace_checks(tmp_path, "img", None)}
    assert results["bwrap"].ok and not results["userns"].ok
    assert "No permissions" in results["userns"].detail and "userns" in results["userns"].fix
    assert results["rootfs"].ran is False
