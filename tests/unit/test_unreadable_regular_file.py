"""A file that stat calls regular but that fails when read is invalid input, never a traceback.

``/proc/self/mem`` is one (size 0, a read at offset 0 fails with EIO), and so is a file on a
failing disk or a network mount that drops: the outside review (round four) gave a link to it
as a trace, a workflow, a policy, a task file, an import source and an egress baseline.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from tests.support.paths import REPO

SUBMIT = REPO / "tests" / "fixtures" / "submit"
MEM = Path("/proc/self/mem")

COMMANDS = [
    ["reproduce", "{bad}"],
    ["reproduce", "--egress-baseline", "{bad}", "{trace}"],
    ["check", "{bad}"],
    ["check", "--policy", "{bad}", "{workflow}"],
    ["submit", "--dry-run", "--variant", "{workflow}", "--tasks", "{bad}"],
    ["import", "openai-messages", "{bad}", "--out", "o"],
    ["import", "otel", "{bad}", "--out", "o"],
    ["import", "tau2", "{bad}", "--out", "o"],
    ["import", "atif", "{bad}", "--out", "o"],
    ["import", "inspect", "{bad}", "--out", "o"],
    ["policy", "diff", "shadow", "reproduce", "--against", "{bad}"],
    ["lint", "{bad}"],
    ["tasks", "extract", "{bad}", "-o", "t.jsonl"],
]


@pytest.mark.skipif(not MEM.exists(), reason="no /proc (not Linux)")
@pytest.mark.parametrize(
    "argv", COMMANDS, ids=[" ".join(a[:2]) + str(i) for i, a in enumerate(COMMANDS)]
)
def test_a_regular_file_whose_read_fails_is_invalid_input_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    bad = tmp_path / "failing.jsonl"
    bad.symlink_to(MEM)
    values = {
        "bad": str(bad),
        "trace": str(REPO / "tests" / "fixtures" / "golden" / "failing.jsonl"),
        "workflow": str(SUBMIT / "a.yaml"),
    }
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SANDBOX_REPLAY_STATE_DIR", str(tmp_path / "state"))
    done = CliRunner().invoke(app, [a.format(**values) for a in argv], catch_exceptions=True)
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    assert done.exit_code == 2, done.output[-800:]
    # submit resolves its paths (a job can be resumed from elsewhere): the link's target
    assert "failing.jsonl" in done.output or "/mem:" in done.output, done.output[-800:]
