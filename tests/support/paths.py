"""Folders of this checkout, for test modules at any depth under tests/."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"
