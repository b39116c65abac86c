"""The runtime's and the worker's start folder is not on their import path.

``python3 -m`` puts the working directory first on ``sys.path``; in a sandbox that is ``/tmp``,
which tool code can write. A module planted there (here ``threading.py`` and ``socket.py``, which
both entry points import after start-up) must never be imported by either process
(`runner.runtime.environment.drop_start_folder`). Found by the review of this session: tool code
returned ``sys.path`` with ``/tmp`` second, ahead of the standard library.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner.runtime.environment import drop_start_folder

ROOT = Path(__file__).resolve().parents[3]
PLANTED = 'open({marker!r}, "w").write("loaded")\nraise ImportError("planted")\n'


@pytest.mark.parametrize("module", ["runner.runtime", "runner.runtime.worker"])
def test_a_module_planted_in_the_start_folder_is_never_imported(
    module: str, tmp_path: Path
) -> None:
    marker = tmp_path / "LOADED"
    for name in ("threading", "socket"):
        (tmp_path / f"{name}.py").write_text(PLANTED.format(marker=str(marker)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["PYTHONPATH"] = str(ROOT)
    subprocess.run(
        [sys.executable, "-m", module],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert not marker.exists(), f"{module} imported a module from its start folder"


def test_only_the_entry_the_interpreter_added_is_taken_out(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    rest = ["/opt/sandbox-replay", str(tmp_path)]  # a later PYTHONPATH entry equal to it stays
    monkeypatch.setattr(sys, "path", [str(tmp_path), *rest])
    assert drop_start_folder() == str(tmp_path)
    assert sys.path == rest
    monkeypatch.setattr(sys, "path", ["/somewhere/else", *rest])
    assert drop_start_folder() is None and sys.path == ["/somewhere/else", *rest]
    monkeypatch.setattr(sys, "path", ["", *rest])
    assert drop_start_folder() == "" and sys.path == rest
