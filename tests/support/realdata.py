"""Where the real public data for tests lives (setting ``realdata_dir``), or skip / fail.

``SANDBOX_REPLAY_REALDATA_DIR`` (default ``../shared/realdata`` relative to the project root,
as `runner.settings.Settings` says). Absent, a test skips; under ``CI=true`` it fails with a
message saying where it looked.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from runner.settings import Settings

ROOT = Path(__file__).resolve().parents[2]


def realdata_dir() -> Path:
    """The configured realdata folder, absolute (relative paths are from the project root)."""
    folder = Settings().realdata_dir
    return folder if folder.is_absolute() else (ROOT / folder).resolve()


def realdata(*parts: str) -> Path:
    """``realdata_dir() / parts``; skip when absent, fail under CI=true."""
    path = realdata_dir().joinpath(*parts)
    if not path.exists():
        message = (
            f"real data not found at {path}: set SANDBOX_REPLAY_REALDATA_DIR to the realdata "
            "folder (default ../shared/realdata relative to the project root)"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path
