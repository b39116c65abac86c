"""The host-side importer of ``module:function`` references (scripted models, judges)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from runner.domain.userfunction import load_function


@pytest.fixture(autouse=True)
def _no_agent_model_cached(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "agent_model", raising=False)
    monkeypatch.delitem(sys.modules, "agent_model.sub", raising=False)


def _variant(root: Path, answer: str) -> Path:
    root.mkdir()
    (root / "agent_model.py").write_text(f"def respond(request):\n    return {answer!r}\n")
    return root


def test_two_variants_modules_of_one_name_each_give_their_own_function(tmp_path: Path) -> None:
    """Was: the second variant's ``agent_model:respond`` was the first's (the module cache)."""
    v1 = _variant(tmp_path / "v1", "one")
    v2 = _variant(tmp_path / "v2", "two")
    first = load_function("agent_model:respond", [v1])
    second = load_function("agent_model:respond", [v2])
    assert (first({}), second({})) == ("one", "two")
    assert load_function("agent_model:respond", [v1])({}) == "one"


def test_the_same_folder_imports_once(tmp_path: Path) -> None:
    v1 = _variant(tmp_path / "v1", "one")
    first = load_function("agent_model:respond", [v1])
    module = sys.modules["agent_model"]
    assert load_function("agent_model:respond", [v1]) is first
    assert sys.modules["agent_model"] is module
