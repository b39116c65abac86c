"""N12: ``lint``, ``tasks extract`` and ``reproduce`` refuse the same traces.

The review found traces that ``lint`` and ``tasks extract`` accepted and ``reproduce``
rejected. The rule that won is ``reproduce``'s, moved into the one reader
(`runner.tracetools.records.WorkflowRef`): a recorded ``workflow.name`` obeys the id rules as
``run_id`` and ``task_id`` do (``reproduce`` writes the recorded workflow to a file of that
name), so all three say exit 2 and name line 1 and the field. And a call recorded with no
response at all, which ``reproduce`` refuses to serve, is refused by ``tasks extract`` as an
observation with the same words (`runner.tracetools.reader.Trace.unanswered`), naming its
line, where it used to fail on its own output's field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import run_cli
from tests.support.paths import REPO

FAILING = REPO / "examples" / "helpdesk" / "traces" / "failing.jsonl"


def _mutated(tmp_path: Path, name: str, change: Any) -> Path:
    lines = [json.loads(x) for x in FAILING.read_text(encoding="utf-8").splitlines()]
    change(lines)
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("bad_name", "why"),
    [("../evil", "contains '/'"), ("CON", "names a Windows device"), ("x.", "ends with a dot")],
)
def test_a_workflow_name_no_id_rule_allows_is_refused_by_all_three(
    tmp_path: Path, bad_name: str, why: str
) -> None:
    trace = _mutated(tmp_path, "named", lambda ls: ls[0]["workflow"].__setitem__("name", bad_name))
    commands = {
        "lint": ["lint", str(trace)],
        "tasks extract": ["tasks", "extract", str(trace), "-o", str(tmp_path / "tasks.jsonl")],
        "reproduce": ["reproduce", str(trace)],  # refused before any sandbox starts
    }
    for command, args in commands.items():
        done = run_cli(args, tmp_path, "sandbox-replay:none", timeout=120)
        output = done.stdout + done.stderr
        assert done.returncode == 2, (command, done.returncode, output[-1500:])
        # a table cell wraps by the width of the others (the trace's path, longer under
        # pytest-xdist's folders): read the words, not the lines
        words = " ".join(output.replace("│", " ").split())
        assert "workflow.name" in words and why in words, (command, output[-1500:])
    assert not (tmp_path / "tasks.jsonl").exists()


def test_a_read_recorded_without_a_response_is_refused_as_an_observation_naming_its_line(
    tmp_path: Path,
) -> None:
    def drop_response(lines: list[dict[str, Any]]) -> None:
        call = lines[1]
        for key in ("body", "body_encoding", "error"):
            call.pop(key, None)

    trace = _mutated(tmp_path, "unanswered", drop_response)
    out = tmp_path / "tasks.jsonl"
    done = run_cli(["tasks", "extract", str(trace), "-o", str(out)], tmp_path, "x", timeout=120)
    assert done.returncode == 2 and not out.exists(), done.stderr[-1500:]
    assert f"{trace}:2: body: call #0 (ticket.get) has no response at all" in done.stderr
    reproduce = run_cli(["reproduce", str(trace)], tmp_path, "x", timeout=120)
    assert reproduce.returncode == 5, reproduce.stdout[-1500:]  # refused, the same words
    assert "call #0 (ticket.get) has no response at all" in reproduce.stdout + reproduce.stderr
