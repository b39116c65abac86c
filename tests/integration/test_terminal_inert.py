"""With real sandboxes: what tool code, a model and a task put into an episode
reaches the user's terminal only as inert text, through every command that prints it.

A tool echoes and raises hostile text, a read tool is called with it (no recording: the error
quotes its arguments), the scripted model answers with it and names a hostile model id, and
the task's expected block quotes it (the judge's reasons do). Then ``submit`` (plan, progress,
report tables), ``report``, ``ledger``, ``run``, ``reproduce``, ``lint`` and ``tasks extract``
print it; the oracle (`tests.unit.cli.test_inert_text.unsafe_in`, by Unicode category) finds
no control, format, separator or surrogate character in any stdout or stderr.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.unit.cli.test_inert_text import HOSTILE, SHOWN, assert_inert, cli

pytestmark = pytest.mark.docker

TOOLS = """
from runner.sdk import Effect, tool


@tool("evil.echo", effect=Effect.PURE)
def echo(text: str) -> str:
    return "tool says " + text


@tool("evil.fail", effect=Effect.PURE)
def fail(text: str) -> str:
    raise ValueError("tool fails: " + text)


@tool("kb.read", effect=Effect.READ)
def read(q: str) -> str:
    return "never runs: reads are served from recordings"
"""

MODEL = """
import json

HOSTILE = json.loads(HOSTILE_JSON)


def respond(request):
    return {
        "id": "r1",
        "model": "gpt-4o" + HOSTILE,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "model: " + HOSTILE}}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }
""".replace("HOSTILE_JSON", repr(json.dumps(HOSTILE)))


def _project(root: Path, image: str) -> tuple[Path, dict[str, str]]:
    root.mkdir(parents=True)
    (root / "evil_tools.py").write_text(textwrap.dedent(TOOLS))
    (root / "evil_model.py").write_text(MODEL)
    head = 'tools: [evil_tools]\nmodel: {provider: scripted, function: "evil_model:respond"}\n'
    (root / "a.yaml").write_text(
        f'name: echoer\nversion: "1"\n{head}steps:\n'
        '  - {id: echo, tool: evil.echo, args: {text: "${task.q}"}}\n'
        '  - id: talk\n    agent: {input: "${steps.echo.output}", tools: [], max_turns: 2}\n'
    )
    (root / "b.yaml").write_text(
        f'name: failer\nversion: "1"\n{head}steps:\n'
        '  - {id: read, tool: kb.read, args: {q: "${task.q}"}}\n'
        '  - {id: fail, tool: evil.fail, args: {text: "${task.q}"}}\n'
    )
    task = {
        "task_id": "t1",
        "input": {"q": HOSTILE},
        "expected": {
            "output_contains": "never said: " + HOSTILE,
            "tool_calls": [{"tool": "evil.echo", "args": {"text": "other " + HOSTILE}}],
        },
    }
    (root / "tasks.jsonl").write_text(json.dumps(task) + "\n")
    for path in root.iterdir():
        path.chmod(0o644)
    root.chmod(0o755)
    env = {"SANDBOX_REPLAY_IMAGE": image, "SANDBOX_REPLAY_STATE_DIR": str(root / "state")}
    return root, env


@pytest.mark.slow
def test_submit_report_run_reproduce_lint_and_extract_print_hostile_text_inert(
    tmp_path: Path, sandbox_image: str
) -> None:
    root, env = _project(tmp_path / "proj", sandbox_image)
    printed: list[str] = []

    def run(*args: str, codes: tuple[int, ...] = (0,)) -> None:
        done = cli(*args, cwd=root, env=env)
        assert done.returncode in codes, (args, done.stdout[-2000:], done.stderr[-2000:])
        assert_inert(done)
        printed.append(done.stdout + done.stderr)

    run("submit", "--variant", "a.yaml", "--variant", "b.yaml", "--tasks", "tasks.jsonl")
    job = next((root / "state" / "jobs").iterdir()).name
    run("report", job)
    run("submit", "--json", "--variant", "a.yaml", "--variant", "b.yaml", "--tasks", "tasks.jsonl")
    run("ledger")
    run("ledger", "--job", job)
    # run's exit code says whether the episode succeeded (1: it did not); the text is the point
    run(
        "--log-format",
        "console",
        "run",
        "a.yaml",
        "--tasks",
        "tasks.jsonl",
        "--task",
        "t1",
        codes=(0, 1),
    )
    run(
        "--log-format",
        "console",
        "run",
        "b.yaml",
        "--tasks",
        "tasks.jsonl",
        "--task",
        "t1",
        codes=(0, 1),
    )
    traces = sorted((root / "state" / "traces").glob("*.jsonl"))
    run("lint", *map(str, traces), codes=(0, 1))
    run("tasks", "extract", "--all", *map(str, traces), "-o", str(tmp_path / "t.jsonl"))
    echoer = next(t for t in traces if '"name":"echoer"' in t.read_text().split("\n", 1)[0])
    run("reproduce", str(echoer), codes=(0, 1))
    run("reproduce", *map(str, traces[:2]), codes=(0, 1, 5))
    everything = "\n".join(printed)
    assert SHOWN in everything  # the hostile text was printed, as escapes
    assert "\\u202egnp.exe" in everything  # the bidi override too
    assert "[bold]B[/bold]" in everything  # markup in data stays text
