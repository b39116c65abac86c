"""`sandbox-replay import tau2`: a small fixture of our own and the public τ² retail results.

The real results live outside the repository (../shared/realdata, setting ``realdata_dir``,
env ``SANDBOX_REPLAY_REALDATA_DIR``, `tests.support.realdata`): absent, their tests skip, or fail
under CI=true.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import structlog
from typer.testing import CliRunner

from runner.cli.app import app
from runner.domain.tasks import load_tasks
from runner.errors import InputError
from runner.importers.output import write_import
from runner.importers.tau2 import read_tau2
from runner.importers.toolset import parse_effect_map
from runner.sdk import canonical_json, schema_hash
from runner.tools.source import load_manifest_tools
from runner.trace.format import failure_signature
from runner.tracetools.reader import read_trace
from tests.support.paths import REPO
from tests.support.realdata import realdata
from tests.support.tracelines import resolved_lines

ROOT = REPO
MINI = ROOT / "tests" / "fixtures" / "import" / "tau2-mini" / "results.json"
SCHEMA = json.loads((ROOT / "docs" / "trace.schema.json").read_text(encoding="utf-8"))


@pytest.fixture(autouse=True)
def _fresh_logging() -> Any:
    """The CLI configures structlog onto CliRunner's stream, closed after the call: reset it."""
    yield
    structlog.reset_defaults()


@pytest.fixture(scope="module")
def tau2_results() -> Path:
    return realdata("tau2-retail", "results.json")


def lines_of(path: Path) -> list[dict[str, Any]]:
    return resolved_lines(path)


def check_output(out: Path) -> dict[str, list[dict[str, Any]]]:
    """Every trace reads cleanly and validates against the schema; tasks and manifest load."""
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(SCHEMA)
    traces = {}
    for path in sorted((out / "traces").glob("*.jsonl")):
        trace = read_trace(path)
        assert trace.problems == (), trace.problems
        lines = lines_of(path)
        for number, line in enumerate(lines, start=1):
            errors = list(validator.iter_errors(line))
            assert not errors, f"{path.name}:{number}: {errors[0].message}"
        assert lines[0]["workflow"]["content"] == (out / "workflow.yaml").read_text("utf-8")
        traces[path.stem] = lines
    tasks = load_tasks(out / "tasks.jsonl")
    assert tasks.errors == []
    specs = load_manifest_tools(out / "tools.manifest.json", "tools.manifest.json", {})
    assert all(spec.module is None for spec in specs)
    return traces


def test_mini_fixture_import(tmp_path: Path) -> None:
    report = write_import(read_tau2(MINI), tmp_path, {})
    traces = check_output(tmp_path)
    assert report["runs"] == 2 and report["failed_runs"] == 1
    assert report["calls"] == {"model": 7, "user": 5, "tool": 5, "total": 17}
    assert report["tool_errors"] == 1 and report["fixed_messages"] == 2

    ok = traces["tau2-mini-1-0"]
    head, calls, end = ok[0], ok[1:-1], ok[-1]
    assert head["task_id"] == "tau2-mini-1" and head["backend"] == "import:tau2"
    assert head["purpose"] == "live" and head["seed"] == 42
    known = head["task_input"]["instructions"]["known_info"]
    assert known == "You are José Núñez, jose@example.com"
    # the greeting is a fixed message of the workflow, not a call
    assert calls[0]["tool"] == "user"
    # the simulated user sees its instructions and the text turns with roles swapped
    assert calls[0]["request"]["messages"] == [
        {"role": "system", "content": canonical_json(head["task_input"]["instructions"])},
        {"role": "user", "content": "Hi! How can I help you today?"},
    ]
    assert calls[1]["request"]["messages"][1] == {
        "role": "assistant",
        "content": "Hi! How can I help you today?",
    }
    assert "fixed_messages:" in head["workflow"]["content"]
    # assistant text together with a tool call stays one model turn carrying both
    turn = calls[1]
    assert turn["tool"] == "model" and turn["model"] == "gpt-4.1"
    assert turn["model_source"] == "config" and turn["raw_io"] is False
    assert json.loads(turn["body"])["message"]["content"] == "Je vérifie votre compte…"
    assert turn["request"]["messages"][0]["role"] == "system"
    nxt = calls[3]["request"]["messages"]
    assert nxt[-2] == json.loads(turn["body"])["message"]  # the provider's message verbatim
    assert nxt[-2]["tool_calls"][0]["function"] == {
        "name": "find_user",
        "arguments": '{"email":"jose@example.com"}',
    }
    assert nxt[-1] == {
        "role": "tool",
        "tool_call_id": "call_A",
        "content": "jose_nunez_1",
    }
    # call_A is reused by a later message for another tool: each result goes to its own call
    tools = [(c["tool"], c["args"], c["body"]) for c in calls if c["tool"] not in ("model", "user")]
    assert tools[0] == ("find_user", {"email": "jose@example.com"}, "jose_nunez_1")
    assert tools[1][0] == "get_order" and json.loads(tools[1][2])["order_id"] == "#W1"
    assert tools[2] == ("calculate", {"expression": "2 + 2"}, "4.0")
    assert all(c["index"] == i for i, c in enumerate(calls))
    assert end == {**end, "status": "succeeded", "exit_code": 0, "failure_signature": None}
    assert end["output"] == "C’est fait ✓"
    # non-ASCII is stored as text, not escaped
    assert "C’est fait ✓" in (tmp_path / "traces" / "tau2-mini-1-0.jsonl").read_text("utf-8")

    failed = traces["tau2-mini-2-0"]
    error_call = next(c for c in failed if c.get("error"))
    assert error_call["error"] == {"class": "ToolError", "message": "Error: Order not found"}
    end = failed[-1]
    last = len(failed) - 3
    assert end["status"] == "failed" and end["exit_code"] == 1
    assert end["failure"] == {
        "call_index": last,
        "tool": "workflow",
        "error_class": "task_failed",
        "exit_code": 1,
    }
    assert end["failure_signature"] == failure_signature(last, "workflow", "task_failed", 1)


def test_mini_tasks_manifest_and_workflows(tmp_path: Path) -> None:
    write_import(read_tau2(MINI), tmp_path, parse_effect_map(["calculate=pure"]))
    tasks = load_tasks(tmp_path / "tasks.jsonl").tasks
    one = tasks["tau2-mini-1"]
    assert [o["tool"] for o in one.observations] == [
        "find_user",
        "get_order",
        "calculate",
        "cancel_order",
    ]
    assert one.expected == {
        "tool_calls": [
            {"tool": "find_user", "args": {"email": "jose@example.com"}},
            {"tool": "cancel_order", "args": {"order_id": "#W1"}},  # compare_args only
        ],
        "output_contains": "#W1",
    }
    two = tasks["tau2-mini-2"]
    assert two.observations[0]["error"]["class"] == "ToolError"
    assert two.expected is None  # two outputs cannot be one output_contains: not invented
    manifest = json.loads((tmp_path / "tools.manifest.json").read_text("utf-8"))
    effects = {t["id"]: t["effect"] for t in manifest["tools"]}
    assert effects == {
        "find_user": "read",
        "get_order": "read",
        "cancel_order": "unsafe",
        "calculate": "pure",
        "transfer_to_human_agents": "unsafe",
    }
    for tool in manifest["tools"]:
        assert tool["schema_hash"] == schema_hash(tool["schema"])
        assert tool["module"] is None and tool["qualname"] is None
    read_only = (tmp_path / "workflow.read-only.yaml").read_text("utf-8")
    for tool_id, effect in effects.items():
        assert (f"- {tool_id}\n" in read_only) == (effect in ("read", "pure")), tool_id
    report = json.loads((tmp_path / "import-report.json").read_text("utf-8"))
    assert report["missing"]["task.expected_outputs_not_representable"] == 1
    assert report["missing"]["model.model_id_from_response"] == 7


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d["simulations"][0].pop("messages"), "simulations[0].messages"),
        (lambda d: d["simulations"][1].update(task_id="99"), "simulations[1].task_id"),
        (
            lambda d: d["simulations"][0]["messages"][2]["tool_calls"][0].update(name="a/b"),
            "simulations[0].messages[2].tool_calls[0].name",
        ),
        (
            lambda d: d["simulations"][1]["messages"].insert(1, {"role": "tool", "id": "x"}),
            "simulations[1].messages[1]",
        ),
    ],
)
def test_bad_results_name_the_field(tmp_path: Path, mutate: Any, field: str) -> None:
    data = json.loads(MINI.read_text("utf-8"))
    mutate(data)
    bad = tmp_path / "results.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    (tmp_path / "mini_tools.json").write_text((MINI.parent / "mini_tools.json").read_text("utf-8"))
    with pytest.raises(InputError) as info:
        write_import(read_tau2(bad), tmp_path / "out", {})
    assert info.value.fields["field"] == field
    assert info.value.fields["file"] == str(bad)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    "mutate",
    [
        lambda t: t.update(evaluation_criteria="text"),
        lambda t: t.update(evaluation_criteria=True),
        lambda t: t.update(evaluation_criteria={"actions": 7}),
        lambda t: t.update(evaluation_criteria={"communicate_info": 7}),
    ],
    ids=["criteria-str", "criteria-bool", "actions-int", "communicate-int"],
)
def test_evaluation_criteria_of_the_wrong_type_are_no_traceback(
    tmp_path: Path, mutate: Any
) -> None:
    """Review round four: ``evaluation_criteria: "text"`` raised AttributeError, exit 1."""
    data = json.loads(MINI.read_text("utf-8"))
    for task in data["tasks"]:
        mutate(task)
    bad = tmp_path / "results.json"
    bad.write_text(json.dumps(data), encoding="utf-8")
    (tmp_path / "mini_tools.json").write_text((MINI.parent / "mini_tools.json").read_text("utf-8"))
    done = CliRunner().invoke(app, ["import", "tau2", str(bad), "--out", str(tmp_path / "o")])
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    assert done.exit_code in (0, 2), done.output[-500:]
    assert done.exit_code == 0 or "results.json" in done.output, done.output[-500:]


def test_numbers_whose_sums_pass_the_largest_float_are_an_input_error(tmp_path: Path) -> None:
    """Review round four: every number 1.7e308 made the import add two of them (inf) and
    ``json.dumps`` raise ValueError, a traceback."""

    def huge(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: huge(v) for k, v in value.items()}
        if isinstance(value, list):
            return [huge(v) for v in value]
        return 1.7e308 if isinstance(value, float) else value

    bad = tmp_path / "results.json"
    bad.write_text(json.dumps(huge(json.loads(MINI.read_text("utf-8")))), encoding="utf-8")
    (tmp_path / "mini_tools.json").write_text((MINI.parent / "mini_tools.json").read_text("utf-8"))
    done = CliRunner().invoke(app, ["import", "tau2", str(bad), "--out", str(tmp_path / "o")])
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    assert done.exit_code == 2 and "results.json" in done.output, done.output[-500:]
    assert not (tmp_path / "o").exists()


def test_cli_imports_and_rejects_bad_input(tmp_path: Path) -> None:
    runner = CliRunner()
    out = tmp_path / "out"
    result = runner.invoke(
        app, ["import", "tau2", str(MINI), "--out", str(out), "--map", "calculate=pure"]
    )
    assert result.exit_code == 0, result.output
    assert "imported 2 runs (1 failed" in result.output
    again = runner.invoke(app, ["import", "tau2", str(MINI), "--out", str(out)])
    assert again.exit_code == 2 and "not empty" in again.output
    broken = tmp_path / "broken.json"
    broken.write_text('{"info": {},\n "tasks": [,]}', encoding="utf-8")
    bad = runner.invoke(app, ["import", "tau2", str(broken), "--out", str(tmp_path / "o2")])
    assert bad.exit_code == 2
    assert f"{broken}:2:" in bad.output and "Traceback" not in bad.output
    typo = runner.invoke(
        app, ["import", "tau2", str(MINI), "--out", str(tmp_path / "o3"), "--map", "calc=pure"]
    )
    assert typo.exit_code == 2 and "calc" in typo.output


# --- the public τ² retail results -----------------------------------------------------------


@pytest.fixture(scope="module")
def retail(tau2_results: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tau2-retail")
    write_import(read_tau2(tau2_results), out, {})
    return out


def test_realdata_all_runs_import(retail: Path, tau2_results: Path) -> None:
    report = json.loads((retail / "import-report.json").read_text("utf-8"))
    assert report["runs"] == 40 and report["tasks"] == 40
    assert report["calls"]["tool"] == 299
    assert report["tool_errors"] == 12
    assert report["failed_runs"] == 6
    assert report["fixed_messages"] == 40
    traces = check_output(retail)
    assert len(traces) == 40
    source = json.loads(tau2_results.read_text("utf-8"))
    rewards = {s["task_id"]: s["reward_info"]["reward"] for s in source["simulations"]}
    for run_id, lines in traces.items():
        end = lines[-1]
        reward = rewards[lines[0]["meta"]["source_task_id"]]
        calls = lines[1:-1]
        assert calls[0]["tool"] == "user"  # the greeting is no call
        if reward == 1.0:
            assert end["status"] == "succeeded" and end["failure_signature"] is None, run_id
        else:
            last = len(calls) - 1
            assert end["status"] == "failed" and end["failure"]["error_class"] == "task_failed"
            assert end["failure_signature"] == failure_signature(last, "workflow", "task_failed", 1)
        for call in calls:
            if call["tool"] in ("model", "user"):
                assert call["model"] == "gpt-4.1" and call["model_source"] == "config"
                assert call["raw_io"] is False and call["body"] is not None
            else:
                assert call["schema_hash"] and call["args"] is not None


def test_realdata_manifest_effects(retail: Path, tau2_results: Path) -> None:
    kinds = {
        t["name"]: t["kind"]
        for t in json.loads((tau2_results.parent / "retail_tools.json").read_text("utf-8"))
    }
    manifest = json.loads((retail / "tools.manifest.json").read_text("utf-8"))
    effects = {t["id"]: t["effect"] for t in manifest["tools"]}
    assert set(effects) == set(kinds) and len(effects) == 15
    for name, kind in kinds.items():
        assert effects[name] == ("read" if kind == "read" else "unsafe"), name
    assert effects["calculate"] == effects["transfer_to_human_agents"] == "unsafe"
    assert Counter(effects.values()) == {"read": 6, "unsafe": 9}
    tasks = load_tasks(retail / "tasks.jsonl").tasks
    assert sum(len(t.observations) for t in tasks.values()) == 299
    assert sum(1 for t in tasks.values() for o in t.observations if o.get("error")) == 12
    assert all(t.expected and t.expected.get("tool_calls") for t in tasks.values())


def test_realdata_lint_reports_what_the_source_lacks(retail: Path) -> None:
    from runner.tracetools.lint import lint_traces

    results, code = lint_traces([retail / "traces"])
    assert len(results) == 40 and code == 1
    found = json.dumps([r.to_json() for r in results])
    assert "model_source" in found and "raw_io" in found


def test_realdata_workflows_check(retail: Path) -> None:
    from runner.admission.eligibility import check_eligibility
    from runner.domain.workflow import load_workflow

    wf = load_workflow(retail / "workflow.yaml")
    agent = wf.spec.steps[0].agent
    assert agent is not None and len(agent.tools) == 15
    assert [(m.role, m.content) for m in agent.fixed_messages] == [
        ("assistant", "Hi! How can I help you today?")
    ]
    manifest = json.loads((retail / "tools.manifest.json").read_text("utf-8"))
    unsafe = {t["id"] for t in manifest["tools"] if t["effect"] == "unsafe"}
    full = check_eligibility([retail / "workflow.yaml"], "shadow")
    assert not full.eligible
    assert {p.tool for p in full.problems} == unsafe
    assert {"calculate", "transfer_to_human_agents"} <= unsafe
    read_only = check_eligibility([retail / "workflow.read-only.yaml"], "shadow")
    assert read_only.eligible, read_only.lines()


# --- the imported requests are the ones the runtime's agent loop builds ----------------------


def replay_through_agent_loop(out: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Drive `runner.runtime.steps.agent.AgentStep` over every imported trace, serving each turn and
    tool result from the trace; a request that differs from its recording is a divergence.

    The runtime itself inserts the fixed messages, takes a bare choice body, serves a recorded
    tool body verbatim (``served_text``) and stops the simulated user at τ²'s stop tokens.
    """
    import yaml

    import runner.runtime.steps.agent as agent_mod
    from runner.providers.replay import _first_difference, match_key
    from runner.runtime.registry import RuntimeRegistry, RuntimeTool
    from runner.runtime.replay.callrecords import message_of

    class Diverged(Exception):
        pass

    class Caller:
        def __init__(self, calls: list[dict[str, Any]]) -> None:
            self.calls, self.i = calls, 0
            self.served_text: str | None = None

        def _next(self) -> dict[str, Any]:
            if self.i >= len(self.calls):
                raise Diverged(f"unrecorded call {self.i}")
            self.i += 1
            return self.calls[self.i - 1]

        def call_model(self, step_id: str, role: str, request: dict[str, Any]) -> Any:
            call = self._next()
            if call["tool"] != role or match_key(request) != match_key(call["request"]):
                raise Diverged(
                    f"call {call['index']}: {_first_difference(request, call['request'])}"
                )
            message = message_of(call["body"].encode("utf-8"), role)
            message.pop("_model", None)
            return message

        def call_tool(self, step_id: str, tool: Any, args: Any) -> Any:
            call = self._next()
            if call["tool"] != tool.id or call["args"] != args:
                raise Diverged(f"call {call['index']}: {tool.id} {args}")
            self.served_text = call["body"]
            return call["body"]

        def record_failed(self, *args: Any) -> None:
            raise Diverged(f"failed call {args}")

    Agent = agent_mod.AgentStep

    manifest = json.loads((out / "tools.manifest.json").read_text("utf-8"))
    registry = RuntimeRegistry([RuntimeTool(t, "recorded", None) for t in manifest["tools"]])
    problems = {}
    for path in sorted((out / "traces").glob("*.jsonl")):
        lines = lines_of(path)
        workflow = yaml.safe_load(lines[0]["workflow"]["content"])
        caller = Caller(lines[1:-1])
        try:
            output = Agent(
                workflow["steps"][0], workflow, registry, caller, lines[0]["task_input"], {}
            ).run()
            if caller.i != len(caller.calls):
                raise Diverged(f"stopped after {caller.i} of {len(caller.calls)} calls")
            if output != lines[-1]["output"]:
                raise Diverged(f"output {output!r}")
        except Diverged as exc:
            problems[path.stem] = str(exc)
    return problems


def test_mini_requests_match_the_agent_loop(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_import(read_tau2(MINI), tmp_path, {})
    assert replay_through_agent_loop(tmp_path, monkeypatch) == {}
    # and a changed recording is caught at its call
    path = tmp_path / "traces" / "tau2-mini-1-0.jsonl"
    lines = lines_of(path)
    lines[1]["request"]["messages"][0]["content"] = "another system prompt"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    assert list(replay_through_agent_loop(tmp_path, monkeypatch)) == ["tau2-mini-1-0"]


def test_realdata_requests_match_the_agent_loop(
    retail: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert replay_through_agent_loop(retail, monkeypatch) == {}


def test_without_tools_file_tools_come_from_the_calls(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    data = json.loads(MINI.read_text("utf-8"))
    data["info"]["environment_info"]["policy"] = "Use ${task.instructions} wisely."
    results.write_text(json.dumps(data), encoding="utf-8")  # no mini_tools.json beside it
    report = write_import(read_tau2(results), tmp_path / "out", {})
    manifest = json.loads((tmp_path / "out" / "tools.manifest.json").read_text("utf-8"))
    assert [t["id"] for t in manifest["tools"]] == [
        "find_user",
        "get_order",
        "calculate",
        "cancel_order",
    ]
    assert all(t["effect"] == "unsafe" and t["schema"] == {} for t in manifest["tools"])
    assert report["missing"]["tool.schema"] == 4
    assert any("mini_tools.json" in note for note in report["notes"])
    assert any("'${'" in note for note in report["notes"])


def test_read_only_tasks_keep_only_read_calls_and_user_stops(tmp_path: Path) -> None:
    write_import(read_tau2(MINI), tmp_path, {})
    manifest = json.loads((tmp_path / "tools.manifest.json").read_text("utf-8"))
    effects = {t["id"]: t["effect"] for t in manifest["tools"]}
    full = [json.loads(x) for x in (tmp_path / "tasks.jsonl").read_text("utf-8").splitlines()]
    read_only = [
        json.loads(x) for x in (tmp_path / "tasks.read-only.jsonl").read_text("utf-8").splitlines()
    ]
    assert [t["task_id"] for t in read_only] == [t["task_id"] for t in full]
    for whole, reads in zip(full, read_only, strict=True):
        assert reads["observations"] == whole["observations"]
        wanted = [
            c
            for c in (whole.get("expected") or {}).get("tool_calls", [])
            if effects[c["tool"]] == "read"
        ]
        assert reads.get("expected", {}).get("tool_calls", []) == wanted
        assert "output_contains" not in reads.get("expected", {})
    assert any(
        effects[c["tool"]] == "unsafe"
        for t in full
        for c in (t.get("expected") or {}).get("tool_calls", [])
    )
    import yaml

    agent = yaml.safe_load((tmp_path / "workflow.yaml").read_text("utf-8"))["steps"][0]["agent"]
    assert agent["user"] == {
        "system": "${task.instructions}",
        "stop": ["###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"],
    }
