"""The tool snapshot in real containers (item 3).

The attack: in the README's own layout (examples/helpdesk) the tasks file, and with it every
task's ``expected`` answer key, sits in the tool folder. A variant with no model whose pure tool
reads ``tasks.jsonl`` beside its module scored 1.00 on the demo tasks, because the whole tool
folder was mounted. Now only a snapshot of what the workflow declares reaches the sandbox.
Also: a root-owned 0700 tool folder works (the sandbox user is uid 10001 here), and what runs
is what was there when the command started, also after an edit mid-submission and on resume.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[2]
HELPDESK = REPO / "examples" / "helpdesk"
CLI = [sys.executable, "-c", "from runner.cli import main; main()"]

CHEAT_TOOLS = '''
"""A variant's own tool: it looks for the answer key beside its module."""
import json
import os
from pathlib import Path

from runner.sdk import Effect, tool

HERE = Path(__file__).resolve().parent


@tool("answer.look", effect=Effect.PURE, description="What lies beside the tool code.")
def look() -> dict:
    return {"folder": sorted(os.listdir(HERE)), "tasks_file": (HERE / "tasks.jsonl").exists()}


@tool("answer.key", effect=Effect.PURE, description="The expected answer of a ticket.")
def answer_key(ticket_id: str) -> str:
    try:
        lines = (HERE / "tasks.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        return "no answer key (%s)" % type(exc).__name__
    for line in lines:
        task = json.loads(line)
        if task["input"].get("ticket_id") == ticket_id:
            return task["expected"]["output_contains"]
    return "not found"
'''

CHEAT_WORKFLOW = """\
# No model: it makes the calls the rubric expects, then answers from the answer key.
name: helpdesk-cheat
version: "1"
tools: [helpdesk_tools, cheat_tools]
steps:
  - id: ticket
    tool: ticket.get
    args: {ticket_id: "${task.ticket_id}"}
  - id: kb
    tool: kb.search
    args: {query: "${steps.ticket.output.subject}"}
  - id: look
    tool: answer.look
    args: {}
  - id: answer
    tool: answer.key
    args: {ticket_id: "${task.ticket_id}"}
"""


def _env(state: Path, image: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SANDBOX_REPLAY"))}
    env.update(
        SANDBOX_REPLAY_STATE_DIR=str(state),
        SANDBOX_REPLAY_IMAGE=image,
        SANDBOX_REPLAY_LOG_FORMAT="json",
    )
    return env


def _cli(cwd: Path, state: Path, image: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args],
        cwd=cwd,
        env=_env(state, image),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _trace(path: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(path).read_text().splitlines()]


def _body(lines: list[dict[str, Any]], step: str) -> Any:
    call = next(c for c in lines if c["type"] == "call" and c.get("step_id") == step)
    assert "error" not in call, call
    return json.loads(call["body"])


def test_a_variant_cannot_read_the_answer_key_beside_the_tool_code(
    tmp_path: Path, sandbox_image: str
) -> None:
    project = tmp_path / "helpdesk"
    shutil.copytree(HELPDESK, project)
    tasks = (project / "tasks.jsonl").read_text().splitlines()[:3]
    (project / "tasks.jsonl").write_text("\n".join(tasks) + "\n")
    (project / "cheat_tools.py").write_text(CHEAT_TOOLS)
    (project / "cheat.yaml").write_text(CHEAT_WORKFLOW)
    (project / "answers.json").write_text('{"ticket-1000": "the key under another name"}\n')
    state = tmp_path / "state"
    done = _cli(
        project,
        state,
        sandbox_image,
        *("submit", "--json", "--variant", "cheat.yaml", "--variant", "v1.yaml"),
        *("--tasks", "tasks.jsonl"),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["runs_by_status"] == {"succeeded": 6}, report["runs_by_status"]
    cheats = [p for p in report["pairs"] if p["variant"] == "helpdesk-cheat@1"]
    assert len(cheats) == 3
    for pair in cheats:
        lines = _trace(pair["trace"])
        look = _body(lines, "look")
        # only what the workflow declares: its two tool modules (no tasks file, no answers.json,
        # no workflows, traces, data or state folder)
        assert look == {"folder": ["cheat_tools.py", "helpdesk_tools.py"], "tasks_file": False}
        assert _body(lines, "answer") == "no answer key (FileNotFoundError)"
        snapshot = lines[0]["environment"]["tool_snapshot"]
        assert isinstance(snapshot, str) and len(snapshot) == 64
    scores = [
        entry["score"]
        for task in report["grading"]["tasks"]
        for entry in task["ranking"]
        if entry["variant"] == "helpdesk-cheat@1"
    ]
    assert len(scores) == 3 and max(scores) < 1.0, scores  # the answer key never reached it


ROOT_ONLY_TOOLS = """
from runner.sdk import Effect, tool

@tool("util.echo", effect=Effect.PURE)
def echo(text: str) -> str:
    return "echo: " + text
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root: the sandbox then runs as uid 10001")
def test_a_root_owned_0700_tool_folder_works_for_run(tmp_path: Path, sandbox_image: str) -> None:
    project = tmp_path / "private"
    project.mkdir(mode=0o700)
    project.chmod(0o700)
    (project / "private_tools.py").write_text(textwrap.dedent(ROOT_ONLY_TOOLS))
    (project / "wf.yaml").write_text(
        'name: private\nversion: "1"\ntools: [private_tools]\n'
        "steps:\n  - id: echo\n    tool: util.echo\n    args: {text: hi}\n"
    )
    (project / "tasks.jsonl").write_text('{"task_id": "t1", "input": {}}\n')
    for path in project.iterdir():
        path.chmod(0o600)
    assert project.stat().st_uid == 0 and project.stat().st_mode & 0o777 == 0o700
    state = tmp_path / "state"
    done = _cli(
        project, state, sandbox_image, "run", "wf.yaml", "--tasks", "tasks.jsonl", "--task", "t1"
    )
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "run " in done.stdout and ": succeeded" in done.stdout, done.stdout
    trace = done.stdout.strip().splitlines()[-1].removeprefix("trace: ")
    assert _body(_trace(trace), "echo") == "echo: hi"


VERSION_TOOLS = """
from runner.sdk import Effect, tool

VERSION = "{version}"

@tool("ver.get", effect=Effect.PURE)
def get() -> str:
    return VERSION
"""


def test_what_runs_is_what_was_there_when_the_command_started_also_on_resume(
    tmp_path: Path, sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An edit of a tool file during a submission, or between a job and its resume, never
    reaches that job's sandboxes: every run mounts the snapshot taken when the job started."""
    from runner.backends.docker import DockerBackend
    from runner.settings import Settings
    from runner.submit.job import execute, prepare
    from runner.submit.jobfolder import load_resume
    from runner.submit.options import CeilingFlags, SubmitOptions
    from runner.submit.scheduler import PairOutcome

    project = tmp_path / "proj"
    project.mkdir()
    tools = project / "ver_tools.py"
    tools.write_text(VERSION_TOOLS.format(version="original"))
    (project / "wf.yaml").write_text(
        'name: ver\nversion: "1"\ntools: [ver_tools]\n'
        "steps:\n  - id: ver\n    tool: ver.get\n    args: {}\n"
    )
    (project / "tasks.jsonl").write_text(
        "".join(f'{{"task_id": "t{i}", "input": {{}}}}\n' for i in (1, 2, 3))
    )
    monkeypatch.chdir(project)
    settings = Settings(state_dir=tmp_path / "state", image=sandbox_image)
    options = SubmitOptions(
        variants=(project / "wf.yaml",),
        names=(None,),
        tasks=project / "tasks.jsonl",
        concurrency=1,
        replay_ceiling=CeilingFlags({"runs": 2}, {"runs": "test"}),
        cwd=project,
    )

    def edit_after_the_first_run(outcomes: Sequence[PairOutcome]) -> None:
        if any(o.trace for o in outcomes) and "original" in tools.read_text():
            tools.write_text(VERSION_TOOLS.format(version="edited during the job"))

    def backend() -> Any:
        return DockerBackend.connect()

    plan = prepare(options, settings)
    first = execute(
        plan,
        options,
        settings,
        backend_factory=backend,
        on_change=edit_after_the_first_run,
        handle_signals=False,
    )
    assert first.exit_code == 4  # the ceiling stopped the third run: the job can be resumed
    assert first.report is not None
    ran = [p for p in first.report.to_json()["pairs"] if p.get("trace")]
    assert len(ran) == 2 and "edited during the job" in tools.read_text()
    traces = [_trace(p["trace"]) for p in ran]
    assert [_body(t, "ver") for t in traces] == ["original", "original"]
    digest = traces[0][0]["environment"]["tool_snapshot"]
    assert traces[1][0]["environment"]["tool_snapshot"] == digest

    tools.write_text(VERSION_TOOLS.format(version="edited before the resume"))
    resumed_options = load_resume(settings, plan.job_id).with_overrides(
        replay_ceiling=CeilingFlags({"runs": 10}, {"runs": "test"})
    )
    resumed = execute(
        prepare(resumed_options, settings, job_id=plan.job_id),
        resumed_options,
        settings,
        backend_factory=backend,
        resume=True,
        handle_signals=False,
    )
    assert resumed.exit_code == 0 and resumed.report is not None
    pairs = resumed.report.to_json()["pairs"]
    (third,) = [p for p in pairs if p["task_id"] == "t3" and p.get("trace")]
    lines = _trace(third["trace"])
    assert _body(lines, "ver") == "original"
    assert lines[0]["environment"]["tool_snapshot"] == digest
    job = json.loads((settings.state_dir / "jobs" / plan.job_id / "job.json").read_text())
    assert job["tool_snapshot"]["digest"] == digest

    fresh_options = SubmitOptions(
        variants=(project / "wf.yaml",), names=(None,), tasks=project / "tasks.jsonl", cwd=project
    )
    fresh = execute(
        prepare(fresh_options, settings),
        fresh_options,
        settings,
        backend_factory=backend,
        handle_signals=False,
    )
    assert fresh.report is not None
    bodies = {_body(_trace(p["trace"]), "ver") for p in fresh.report.to_json()["pairs"]}
    assert bodies == {"edited before the resume"}  # a new command takes a new snapshot
