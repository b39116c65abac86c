"""``docs/screenshots.py`` without the dev extra says what it needs (was: a traceback)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.paths import REPO


def test_without_pytest_it_names_the_dev_extra_and_exits_2() -> None:
    # -S: no site-packages, so no pytest (what a user without the dev extra has)
    done = subprocess.run(
        [sys.executable, "-S", str(REPO / "docs" / "screenshots.py")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "needs the dev extra (pip install -e '.[dev]')" in done.stderr
    assert "Traceback" not in done.stderr
