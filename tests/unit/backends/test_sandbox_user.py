"""Which user a sandbox runs as: the host user's own ids, never root."""

from __future__ import annotations

import pytest

from runner.backends import base
from runner.backends.base import SandboxSpec, sandbox_user


def test_root_host_gets_the_image_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base.os, "getuid", lambda: 0, raising=False)
    monkeypatch.setattr(base.os, "getgid", lambda: 0, raising=False)
    assert sandbox_user() == "10001:10001"


def test_non_root_host_user_keeps_its_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(base.os, "getuid", lambda: 1000, raising=False)
    monkeypatch.setattr(base.os, "getgid", lambda: 1001, raising=False)
    assert sandbox_user() == "1000:1001"


def test_platform_without_posix_ids(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(base.os, "getuid", raising=False)
    assert sandbox_user() == "10001:10001"


@pytest.mark.parametrize("user", ["0", "0:0", "root", "", "x:1"])
def test_spec_refuses_root_or_names(user: str) -> None:
    with pytest.raises(ValueError, match="non-root"):
        SandboxSpec(run_id="r", image="i", command=("true",), user=user)
