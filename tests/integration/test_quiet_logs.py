"""``run`` and ``reproduce`` in a CI log: the verdict alone on stdout, no info log lines.

Before, every command but submit/report/ledger logged its info events (episode_starting,
tool_snapshot_built, reproduce_verdict, ...) as JSON lines on stderr, which a CI log
interleaves with the verdict. Now info events are off unless ``-v``, ``--log-level`` or
``SANDBOX_REPLAY_LOG_LEVEL`` asks for them, and they never go to stdout.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.cli import run_cli

REPO = Path(__file__).resolve().parents[2]
HELPDESK = REPO / "examples" / "helpdesk"

pytestmark = pytest.mark.docker


def _log_lines(text: str) -> list[dict[str, object]]:
    """The JSON log lines of ``text`` (stderr is not a TTY here: logs are JSON)."""
    return [json.loads(x) for x in text.splitlines() if x.startswith("{") and '"event"' in x]


def test_reproduce_prints_no_info_lines_unless_asked(
    tmp_path: Path, sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SANDBOX_REPLAY_LOG_LEVEL", raising=False)
    assert "SANDBOX_REPLAY_LOG_LEVEL" not in os.environ
    trace = str(HELPDESK / "traces" / "failing.jsonl")
    quiet = run_cli(["reproduce", trace], HELPDESK, sandbox_image, state=tmp_path / "s1")
    assert quiet.returncode == 0, quiet.stdout + quiet.stderr
    assert not [e for e in _log_lines(quiet.stderr) if e.get("level") == "info"], quiet.stderr
    assert not _log_lines(quiet.stdout)  # logs never go to stdout
    assert quiet.stdout.rstrip().splitlines()[-1] == "1 trace: 1 reproduced"

    verbose = run_cli(["-v", "reproduce", trace], HELPDESK, sandbox_image, state=tmp_path / "s2")
    assert verbose.returncode == 0, verbose.stdout + verbose.stderr
    events = {e.get("event") for e in _log_lines(verbose.stderr)}
    assert {"episode_starting", "reproduce_verdict"} <= events, events
    assert not _log_lines(verbose.stdout)
