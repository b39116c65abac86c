"""Attack test: ``$`` in Python's ``re`` matches before a trailing newline.

Several validators anchor with ``^...$`` and call ``.match``: ``"read_file\\n"`` passes
them, because ``$`` also matches just before a final ``\\n`` (``\\Z`` or ``fullmatch`` does
not). So an MCP ``tools/list`` (a saved file, or a stdio server's answer: hostile) can list
``read_file\\n`` beside ``read_file`` as a second, distinct tool with its own effect class, a
workflow step can name it, and ``check`` prints the raw newline to the terminal and into
its message (``tool "delete_all`` / ``" is unsafe ...``). The id rules of
`runner.domain.ids` refuse the same value ("contains a control or unprintable character").
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from runner.domain.ids import id_problem
from runner.errors import InputError
from runner.tools.mcp import listed_tools
from tests.support.paths import REPO


def test_control_the_id_rules_refuse_a_trailing_newline() -> None:
    assert id_problem("read_file\n") is not None


def test_an_mcp_tool_name_with_a_trailing_newline_is_refused() -> None:
    data = {
        "tools": [
            {"name": "delete_all\n", "annotations": {"readOnlyHint": True}},
            {"name": "delete_all"},
        ]
    }
    with pytest.raises(InputError, match="not a tool name"):  # refused: exit 2, field named
        listed_tools(data, file="list.json")


def test_check_never_prints_a_raw_newline_from_a_tool_name(tmp_path: Path) -> None:
    (tmp_path / "list.json").write_text('{"tools": [{"name": "delete_all\\n"}]}', "utf-8")
    (tmp_path / "wf.yaml").write_text(
        'name: w\nversion: "1"\ntools:\n  - mcp: {tools_list: list.json}\n'
        'steps:\n  - id: s\n    tool: "delete_all\\n"\n    args: {}\n',
        encoding="utf-8",
    )
    done = subprocess.run(
        [sys.executable, "-m", "runner", "check", "wf.yaml"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        timeout=60,
        check=False,
    )
    assert "Traceback" not in done.stderr
    output = done.stdout + done.stderr
    assert 'delete_all\n"' not in output, output


VALIDATORS = [
    ("runner.tools.mcp", "_NAME", "read_file"),
    ("runner.admission.answer", "_TOOL_ID", "ticket.get"),
    ("runner.admission.answer", "_MODULE", "tools.helpdesk"),
    ("runner.runtime.replay.callrecords", "_TOOL_ID", "ticket.get"),
    ("runner.wire.argrules", "_NAME", "no-rm"),
    ("runner.policy.loader", "_NAME", "shadow"),
    ("runner.policy.rules", "_ARG", "command"),
    ("runner.policy.rules", "_TOOL", "shell.*"),
    ("runner.policy.models", "_GLOB", "email.*"),
    ("runner.policy.models", "_NAME", "shadow"),
    ("runner.backends.labels", "_NAME_OK", "run-1"),
    ("runner.trace.redact_rules", "_NAME", "ssn"),
]


@pytest.mark.parametrize(("module", "name", "good"), VALIDATORS)
def test_name_validators_refuse_a_trailing_newline(module: str, name: str, good: str) -> None:
    pattern: re.Pattern[str] = getattr(__import__(module, fromlist=[name]), name)
    assert pattern.match(good)
    assert pattern.match(good + "\n") is None


def test_no_validator_in_runner_is_anchored_with_a_dollar() -> None:
    """Every ``re.compile(r"^...")`` of runner/ ends with ``\\Z`` (pydantic's ``pattern=`` is
    Rust regex, where ``$`` is the end of the text, so it is not concerned)."""
    anchored = re.compile(r"""re\.compile\(r?["']\^[^\n]*\$["']""")
    found = [
        f"{path.relative_to(REPO)}:{n}"
        for path in sorted((REPO / "runner").rglob("*.py"))
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if anchored.search(line)
    ]
    assert found == [], found
