"""The test tree's own rules: test modules are collected by basename (rootdir-relative imports,
no packages), so two test files with the same name in different folders break collection."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_test_module_basenames_are_unique() -> None:
    names = Counter(p.name for p in TESTS.rglob("test_*.py") if "fixtures" not in p.parts)
    assert [name for name, count in names.items() if count > 1] == []
