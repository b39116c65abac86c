"""Workflow files: strict frozen models, the normalised shape, errors with file, line and field."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from runner.domain.workflow import Workflow, load_workflow
from runner.errors import InputError
from tests.support.paths import REPO

ROOT = REPO
FIXTURES = ROOT / "tests" / "fixtures" / "helpdesk"


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "wf.yaml"
    path.write_text(text)
    return path


def _error(tmp_path: Path, text: str) -> InputError:
    with pytest.raises(InputError) as info:
        load_workflow(_write(tmp_path, text))
    assert info.value.exit_code == 2
    return info.value


def test_safe_fixture_loads() -> None:
    wf = load_workflow(FIXTURES / "safe.yaml")
    assert wf.spec.name == "helpdesk"
    assert wf.spec.version == "2"  # an int in the file, a string in the model
    assert wf.spec.tool_ids() == ["ticket.get", "kb.search", "reply.draft", "notes.append"]
    assert wf.content_hash == hashlib.sha256((FIXTURES / "safe.yaml").read_bytes()).hexdigest()
    assert wf.source == (FIXTURES / "safe.yaml").read_text()
    assert wf.folder == FIXTURES
    assert wf.line_of(("steps", 1, "agent", "tools", 0)) == 15


def test_normalised_is_the_documented_shape() -> None:
    doc = (ROOT / "docs" / "internals.md").read_text()
    example = re.search(r"```json\n(\{\"name\": \"helpdesk\".*?)```", doc, re.S)
    assert example is not None
    expected = json.loads(example.group(1))
    yaml_text = """
name: helpdesk
version: 2
tools: [helpdesk_tools, imported/manifest.json]
model: {provider: scripted, function: "helpdesk_model:respond", settings: {temperature: 0}}
steps:
  - id: fetch
    tool: ticket.get
    args: {ticket_id: "${task.ticket_id}"}
  - id: answer
    agent: {tools: [kb.search], max_turns: 6, system: "You are ..."}
"""
    wf = Workflow.model_validate(__import__("yaml").safe_load(yaml_text))
    assert wf.normalised() == expected
    assert json.loads(json.dumps(wf.normalised())) == expected


def test_models_are_frozen() -> None:
    wf = load_workflow(FIXTURES / "safe.yaml")
    with pytest.raises(ValidationError):
        wf.spec.name = "other"  # type: ignore[misc]


def test_a_typo_in_a_key_is_named_with_its_line(tmp_path: Path) -> None:
    error = _error(
        tmp_path,
        "name: w\nversion: '1'\nstpes:\n  - id: a\n    tool: x.y\n",
    )
    assert error.fields["line"] == 3
    assert error.fields["field"] == "stpes"
    assert "unknown key 'stpes' (did you mean 'steps'?)" in str(error)


def test_a_typo_inside_a_step_is_named_with_its_line() -> None:
    with pytest.raises(InputError) as info:
        load_workflow(FIXTURES / "typo_key.yaml")
    error = info.value
    assert (error.fields["line"], error.fields["field"]) == (7, "steps[0].agrs")
    assert "unknown key 'agrs' (did you mean 'args'?)" in str(error)
    assert str(error).startswith(f"{FIXTURES / 'typo_key.yaml'}:7: steps[0].agrs: ")


@pytest.mark.parametrize(
    ("text", "line", "needle"),
    [
        ("name: w\nversion: 2.10\nsteps: [{id: a, tool: x.y}]\n", 2, "quote it"),
        ("name: w\nversion: '1'\nsteps: []\n", 3, "at least 1"),
        (
            "name: w\nversion: '1'\nsteps:\n  - id: a\n",
            4,
            "exactly one of 'tool', 'agent' or 'program'",
        ),
        (
            "name: w\nversion: '1'\nsteps:\n  - id: a\n    tool: x.y\n    agent: {max_turns: 1}\n",
            4,
            "exactly one",
        ),
        ("name: w\nversion: '1'\nsteps:\n  - id: 'a b'\n    tool: x.y\n", 4, "step id 'a b'"),
        (
            "name: w\nversion: '1'\nsteps:\n  - id: a\n    agent: {tools: [k.s], max_turns: 0}\n",
            5,
            "greater than or equal to 1",
        ),
        (
            "name: w\nversion: '1'\nsteps:\n  - id: a\n"
            "    agent: {tools: [k.s, k.s], max_turns: 1}\n",
            5,
            "listed twice",
        ),
        (
            "name: w\nversion: '1'\nmodel: {provider: scripted}\nsteps: [{id: a, tool: x.y}]\n",
            3,
            "needs 'function",
        ),
        (
            "name: w\nversion: '1'\nmodel: {provider: gpt}\nsteps: [{id: a, tool: x.y}]\n",
            3,
            "'scripted', 'replay', 'openai' or 'anthropic'",
        ),
        (
            "name: w\nversion: '1'\ntools: ['../x.py']\nsteps: [{id: a, tool: x.y}]\n",
            3,
            "neither a dotted module name nor a path ending in .json",
        ),
        ("name: w\nversion: '1'\nsteps: [{id: a, tool: 'not a tool'}]\n", 3, "not a tool id"),
        ("name: w\nname: v\n", 2, "appears twice"),
        ("name: [w\n", 2, "invalid YAML"),
        ("- a\n- b\n", 1, "must be a YAML mapping"),
    ],
)
def test_bad_workflows_name_file_line_and_field(
    tmp_path: Path, text: str, line: int, needle: str
) -> None:
    error = _error(tmp_path, text)
    assert needle in str(error)
    assert error.fields["file"] == str(tmp_path / "wf.yaml")
    assert error.fields["line"] == line


def test_every_problem_is_listed(tmp_path: Path) -> None:
    error = _error(
        tmp_path,
        "name: w\nversion: '1'\nsteps:\n  - id: a\n    toll: x.y\n  - id: b\n    tool: 'b a d'\n",
    )
    text = str(error)
    assert "unknown key 'toll'" in text
    assert "not a tool id" in text
    assert f"{tmp_path / 'wf.yaml'}:7:" in text


@pytest.mark.parametrize(
    ("args", "needle", "field"),
    [
        (
            "{x: '${steps.later.output}'}",
            "step 'later' comes later than step 'first'",
            "steps[0].args.x",
        ),
        ("{x: 'id ${steps.nope.output.id}'}", "there is no step 'nope'", "steps[0].args.x"),
        ("{x: '${steps.first.output}'}", "cannot use its own output", "steps[0].args.x"),
        ("{x: {deep: ['${stepz.a.output}']}}", "is not a reference", "steps[0].args.x.deep[0]"),
        ("{x: '${task}'}", "is not a reference", "steps[0].args.x"),
    ],
)
def test_references_must_name_an_earlier_step(
    tmp_path: Path, args: str, needle: str, field: str
) -> None:
    error = _error(
        tmp_path,
        f"name: w\nversion: '1'\nsteps:\n  - id: first\n    tool: a.b\n    args: {args}\n"
        "  - id: later\n    tool: a.c\n",
    )
    assert needle in str(error)
    assert error.fields["line"] == 6
    assert error.fields["field"] == field


def test_good_references_and_agent_prompt_references(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "name: w\nversion: '1'\nsteps:\n"
        "  - id: a\n    tool: a.b\n    args: {x: '${task.ticket.id}', y: 'n=${task.n}'}\n"
        "  - id: b\n    agent:\n      tools: []\n      max_turns: 1\n"
        "      system: 'about ${steps.a.output.subject}'\n      input: '${steps.a.output}'\n",
    )
    assert load_workflow(path).spec.steps[1].agent is not None
    bad = _write(
        tmp_path,
        "name: w\nversion: '1'\nsteps:\n  - id: b\n    agent:\n      max_turns: 1\n"
        "      system: 'about ${steps.c.output}'\n  - id: c\n    tool: a.b\n",
    )
    with pytest.raises(InputError) as info:
        load_workflow(bad)
    assert info.value.fields["field"] == "steps[0].agent.system"
    assert info.value.fields["line"] == 7


def test_fixed_messages_of_an_agent(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "name: w\nversion: '1'\nsteps:\n  - id: a\n    agent:\n      max_turns: 1\n"
        "      fixed_messages:\n        - {role: assistant, content: 'Hi! ${not a ref}'}\n",
    )
    agent = load_workflow(path).normalised()["steps"][0]["agent"]
    assert agent["fixed_messages"] == [{"role": "assistant", "content": "Hi! ${not a ref}"}]
    bad = _write(
        tmp_path,
        "name: w\nversion: '1'\nsteps:\n  - id: a\n    agent:\n      max_turns: 1\n"
        "      fixed_messages:\n        - {role: tool, content: x}\n",
    )
    with pytest.raises(InputError) as info:
        load_workflow(bad)
    assert info.value.fields["field"] == "steps[0].agent.fixed_messages[0].role"
    assert info.value.fields["line"] == 8


def test_duplicate_step_ids(tmp_path: Path) -> None:
    error = _error(
        tmp_path,
        "name: w\nversion: '1'\nsteps:\n  - id: a\n    tool: x.y\n  - id: a\n    tool: x.z\n",
    )
    assert "step id 'a' is used twice" in str(error)
    assert (error.fields["line"], error.fields["field"]) == (6, "steps[1].id")


def test_direct_construction_validates_references_too() -> None:
    with pytest.raises(ValidationError, match="there is no step 'x'"):
        Workflow.model_validate(
            {
                "name": "w",
                "version": "1",
                "steps": [{"id": "a", "tool": "t.u", "args": {"q": "${steps.x.output}"}}],
            }
        )


def test_recursive_and_exploding_aliases_are_input_errors(tmp_path: Path) -> None:
    error = _error(tmp_path, "name: &a [*a]\n")
    assert "recursive" in str(error)
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 7)]
    error = _error(tmp_path, "\n".join(lines) + "\n")
    assert "aliases are expanded" in str(error)


def test_not_utf8_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "wf.yaml"
    path.write_bytes(b"name: w\nversion: '\xff'\n")
    with pytest.raises(InputError, match="not UTF-8") as info:
        load_workflow(path)
    assert info.value.fields["line"] == 2
    with pytest.raises(InputError, match="cannot read workflow"):
        load_workflow(tmp_path / "absent.yaml")


def test_a_program_module_is_the_users_own_code_never_the_standard_library(
    tmp_path: Path,
) -> None:
    """``program: os:system`` passed ``check`` (attack review): a program resolves only in the
    workflow's folder or the current one, never to the standard library or installed packages."""
    from runner.domain.workflow import load_workflow
    from runner.tools.programs import program_modules

    (tmp_path / "agent.py").write_text("def run(task):\n    return task\n")
    for program, ok in (("agent:run", True), ("os:system", False), ("json:loads", False)):
        path = tmp_path / "wf.yaml"
        path.write_text(
            "name: a\nversion: '1'\ntools: []\nsteps:\n"
            f"  - {{id: agent, program: '{program}', tools: []}}\n"
        )
        workflow = load_workflow(path)
        if ok:
            assert [(i, m) for i, m, _ in program_modules(workflow)] == [(0, "agent")]
        else:
            with pytest.raises(InputError, match="never a module of the standard library"):
                program_modules(workflow)
