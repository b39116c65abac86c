"""tests/support/browser.py: without chromium the browser tests fail under CI, skip elsewhere."""

from __future__ import annotations

from pathlib import Path

import pytest

import tests.support.browser as tb


def test_missing_chromium_fails_under_ci(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tb, "CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="required here"):
        tb.Browser(tmp_path)


def test_missing_chromium_skips_elsewhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tb, "CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("SANDBOX_REPLAY_REQUIRE_BROWSER", raising=False)
    with pytest.raises(pytest.skip.Exception, match="no usable headless chromium"):
        tb.Browser(tmp_path)
