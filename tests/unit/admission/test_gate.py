"""The gate of ``run`` and ``submit`` (runner/admission/gate.py): read, describe.

A tool whose effect is not literal is ``unsafe`` to the reading (``check`` fails closed), but
``run`` and ``submit`` leave it to the sandbox's description: eligible when the module really
declares a safe effect, refused (exit 3, nothing run, no job written) when it declares an
unsafe one. The runtime side runs as a local process here (trusted modules); Docker:
tests/integration/test_no_host_import.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from structlog.testing import capture_logs

from runner.admission.eligibility import check_eligibility
from runner.admission.gate import read_gate
from runner.backends.unsandboxed import UnsandboxedProcessBackend
from runner.errors import IneligibleError
from runner.runs.run import execute_run
from runner.settings import Settings
from runner.submit.job import execute, prepare
from runner.submit.options import SubmitOptions

MODULE = """\
from runner.sdk import Effect, tool

EFFECTS = {{"answer": Effect.{effect}}}


@tool("text.answer", effect=EFFECTS["answer"])
def answer(topic: str) -> str:
    return "answer about " + topic
"""


def _project(tmp_path: Path, effect: str) -> tuple[Path, Path]:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "dyn_tools.py").write_text(MODULE.format(effect=effect))
    (folder / "wf.yaml").write_text(
        "name: dyn\nversion: '1'\ntools: [dyn_tools]\nsteps:\n  - id: a\n    tool: text.answer\n"
        '    args: {topic: "${task.topic}"}\n'
    )
    (folder / "tasks.jsonl").write_text('{"task_id": "t1", "input": {"topic": "billing"}}\n')
    return folder / "wf.yaml", folder / "tasks.jsonl"


def test_check_fails_closed_but_run_takes_the_sandboxs_word(tmp_path: Path) -> None:
    workflow, tasks = _project(tmp_path, "PURE")
    [problem] = check_eligibility([workflow], "shadow").problems
    assert problem.kind == "denied" and not problem.decided
    assert "effect given by a non-literal expression (EFFECTS['answer'])" in problem.message
    settings = Settings(state_dir=tmp_path / "state")
    result = execute_run(settings, workflow, tasks, "t1", backend=UnsandboxedProcessBackend())
    assert result.status == "succeeded" and result.end["output"] == "answer about billing"


def test_submit_refuses_what_the_sandbox_describes_as_unsafe_before_any_job(
    tmp_path: Path,
) -> None:
    workflow, tasks = _project(tmp_path, "UNSAFE")
    settings = Settings(state_dir=tmp_path / "state")
    options = SubmitOptions(variants=(workflow,), names=(None,), tasks=tasks, cwd=workflow.parent)
    plan = prepare(options, settings)  # the reading cannot decide: the plan is printed
    with pytest.raises(IneligibleError) as info:
        execute(
            plan, options, settings, backend_factory=UnsandboxedProcessBackend, handle_signals=False
        )
    assert 'tool "text.answer" is unsafe: denied by' in str(info.value)
    assert info.value.exit_code == 3
    assert (
        not (tmp_path / "state" / "jobs").exists()
        and not (tmp_path / "state" / "ledger.sqlite3").exists()
    )
    with pytest.raises(IneligibleError):
        execute_run(settings, workflow, tasks, "t1", backend=UnsandboxedProcessBackend())
    assert not (tmp_path / "state" / "traces").exists()


def test_run_does_not_warn_that_an_mcp_tool_does_not_resolve(tmp_path: Path) -> None:
    """An MCP server's tools are listed in a sandbox by ``check`` and by ``run`` alike: the
    reading's "does not resolve" is no disagreement to warn about (it was, for every MCP
    tool); a tool the reading could not read literally still is (``check`` fails on it)."""
    folder = tmp_path / "mcp"
    folder.mkdir()
    (folder / "server.py").write_text("raise SystemExit('never run on the host')\n")
    (folder / "wf.yaml").write_text(
        "name: m\nversion: '1'\ntools:\n  - mcp: {command: [python3, server.py], prefix: docs}\n"
        "steps:\n  - id: a\n    tool: docs.search_docs\n"
    )
    with capture_logs() as logs:
        report = read_gate([folder / "wf.yaml"], "shadow")
    [problem] = report.problems  # undecided: the sandbox lists the server
    assert not problem.decided and "listed only inside a sandbox" in problem.message
    assert [e for e in logs if e["event"] == "eligibility_left_to_the_sandbox"] == []

    workflow, _ = _project(tmp_path, "PURE")
    with capture_logs() as logs:
        read_gate([workflow], "shadow")
    [warning] = [e for e in logs if e["event"] == "eligibility_left_to_the_sandbox"]
    assert "text.answer" in warning["problems"][0]
