"""Tool steps in the runtime: dispositions, templating, failures, denial, the injected clock."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from tests.support.paths import TESTS

sys.path.insert(0, str(TESTS / "fixtures" / "runtime"))
from fakehost import Result, manifest_for, run_runtime, write_run_dir

START = 1761574800.0


def _obs(
    tool: str, args: dict[str, Any], value: Any = None, error: dict | None = None
) -> dict[str, Any]:
    record: dict[str, Any] = {"tool": tool, "args": args}
    if error is not None:
        record["error"] = error
    else:
        record.update(body=json.dumps(value), body_encoding="text")
    return record


def _run(
    tmp_path: Path,
    steps: list[dict[str, Any]],
    dispositions: dict[str, str],
    task_input: dict[str, Any] | None = None,
    observations: list | None = None,
    **kwargs: Any,
) -> Result:
    workflow = {"name": "w", "version": "1", "model": None, "steps": steps}
    task = {"task_id": "t1", "input": task_input or {}, "observations": observations or []}
    run_dir = write_run_dir(tmp_path / "run", workflow, task, manifest_for(dispositions), **kwargs)
    result = run_runtime(run_dir, tmp_path)
    assert result.returncode == 0, result.stderr
    return result


def test_each_disposition_and_templating(tmp_path: Path) -> None:
    steps = [
        {"id": "fetch", "tool": "ticket.get", "args": {"ticket_id": "${task.ticket}"}},
        {"id": "sum", "tool": "math.add", "args": {"a": "${task.n}", "b": 2}},
        {
            "id": "note",
            "tool": "notes.write",
            "args": {
                "name": "n1",
                "text": "#${steps.fetch.output.id}: ${steps.fetch.output.tags} "
                "sum=${steps.sum.output}",
            },
        },
        {"id": "shout", "tool": "text.upper", "args": {"text": "${steps.fetch.output.tags.1}"}},
    ]
    ticket = {"id": "T-1", "tags": ["a", "b"]}
    result = _run(
        tmp_path,
        steps,
        {
            "ticket.get": "recorded",
            "math.add": "execute",
            "notes.write": "execute",
            "text.upper": "execute",
        },
        task_input={"ticket": "T-1", "n": 40},
        observations=[_obs("ticket.get", {"ticket_id": "T-1"}, ticket)],
    )
    episode = result.episode
    assert episode["status"] == "succeeded" and episode["not_run"] == []
    assert episode["output"] == "B"
    calls = result.calls
    assert [c["index"] for c in calls] == [0, 1, 2, 3]
    assert [c["source"] for c in calls] == ["observation", "executed", "executed", "executed"]
    assert [c["effect"] for c in calls] == ["read", "pure", "local", "pure"]
    assert calls[1]["args"] == {"a": 40, "b": 2}  # a whole-string reference keeps its type
    assert calls[2]["args"]["text"] == '#T-1: ["a","b"] sum=42'
    assert (tmp_path / "note-n1").read_text() == '#T-1: ["a","b"] sum=42'
    assert not (tmp_path / "LIVE-READ-EXECUTED").exists()  # recorded code never ran
    for call in calls:
        assert call["v"] == 1 and call["type"] == "call" and len(call["schema_hash"]) == 64
        assert call["body_encoding"] == "text" and call["duration_s"] >= 0
    assert [c["clock"] for c in calls] == [START + 1, START + 2, START + 3, START + 4]
    states = [(m["step_id"], m["state"]) for m in result.of("step")]
    assert states == [
        (s, st) for s in ("fetch", "sum", "note", "shout") for st in ("started", "finished")
    ]


def test_a_failing_tool_step_ends_the_episode_and_later_steps_are_not_run(tmp_path: Path) -> None:
    steps = [
        {"id": "one", "tool": "math.add", "args": {"a": 1, "b": 1}},
        {"id": "boom", "tool": "misc.fail", "args": {"key": "missing"}},
        {"id": "three", "tool": "math.add", "args": {"a": 1, "b": 1}},
        {"id": "four", "tool": "text.upper", "args": {"text": "x"}},
    ]
    result = _run(
        tmp_path, steps, {"math.add": "execute", "misc.fail": "execute", "text.upper": "execute"}
    )
    episode = result.episode
    assert episode["status"] == "failed"
    assert episode["not_run"] == ["three", "four"]
    assert episode["failure"] == {"call_index": 1, "tool": "misc.fail", "error_class": "KeyError"}
    assert episode["error"] == {"class": "KeyError", "message": "'missing'"}
    assert episode["output"] == 2
    assert len(result.calls) == 2 and result.calls[1]["error"]["class"] == "KeyError"
    assert ("three", "not_run") in [(m["step_id"], m["state"]) for m in result.of("step")]


def test_sys_exit_in_a_tool_is_a_tool_error_not_the_end_of_the_runtime(tmp_path: Path) -> None:
    result = _run(
        tmp_path, [{"id": "x", "tool": "misc.exit", "args": {}}], {"misc.exit": "execute"}
    )
    assert result.episode["status"] == "failed"
    assert result.episode["failure"]["error_class"] == "SystemExit"


def test_a_step_naming_a_tool_absent_from_the_manifest_is_denied(tmp_path: Path) -> None:
    steps = [
        {"id": "one", "tool": "math.add", "args": {"a": 1, "b": 1}},
        {"id": "send", "tool": "email.send", "args": {"to": "x@example.com", "body": "b"}},
        {"id": "after", "tool": "math.add", "args": {"a": 1, "b": 1}},
    ]
    result = _run(tmp_path, steps, {"math.add": "execute"})
    episode = result.episode
    assert episode["status"] == "denied"
    assert "email.send" in episode["error"]["message"]
    assert episode["error"]["class"] == "runner.errors.ToolNotResolvable"
    assert episode["failure"] == {
        "call_index": 0,
        "tool": "email.send",
        "error_class": "runner.errors.ToolNotResolvable",
    }
    assert episode["not_run"] == ["after"]
    assert len(result.calls) == 1  # the denied tool was never called
    assert not (tmp_path / "EMAIL-SENT").exists()


def test_calling_a_denied_function_directly_raises_capability_denied(tmp_path: Path) -> None:
    # misc.direct_unsafe is allowed; inside it calls email.send's function, which is not
    result = _run(
        tmp_path,
        [{"id": "d", "tool": "misc.direct_unsafe", "args": {}}],
        {"misc.direct_unsafe": "execute"},
    )
    episode = result.episode
    assert episode["status"] == "denied"
    assert episode["failure"]["error_class"] == "runner.errors.CapabilityDenied"
    assert "email.send" in episode["error"]["message"]
    assert not (tmp_path / "EMAIL-SENT").exists(), "the denied tool's code executed"


def test_the_guard_holds_in_threads_started_by_a_tool(tmp_path: Path) -> None:
    result = _run(
        tmp_path,
        [{"id": "d", "tool": "misc.thread_unsafe", "args": {}}],
        {"misc.thread_unsafe": "execute"},
    )
    assert result.episode["output"] == "CapabilityDenied"
    assert not (tmp_path / "EMAIL-SENT").exists()


def test_a_recorded_tool_is_not_callable_directly_either(tmp_path: Path) -> None:
    # email.send recorded (reproduce-style): its code must not run even when called directly
    result = _run(
        tmp_path,
        [{"id": "d", "tool": "misc.direct_unsafe", "args": {}}],
        {"misc.direct_unsafe": "execute", "email.send": "recorded"},
    )
    assert result.episode["status"] == "denied"
    assert not (tmp_path / "EMAIL-SENT").exists()


def test_the_injected_clock_is_what_tools_read(tmp_path: Path) -> None:
    steps = [
        {"id": "a", "tool": "misc.now", "args": {}},
        {"id": "b", "tool": "misc.now", "args": {}},
    ]
    result = _run(tmp_path, steps, {"misc.now": "execute"}, clock={"start": 1000.0, "step_s": 0.5})
    assert [c["body"] for c in result.calls] == ["1000.5", "1001.0"]
    assert [c["clock"] for c in result.calls] == [1000.5, 1001.0]


def test_a_bad_reference_fails_the_step_naming_it(tmp_path: Path) -> None:
    steps = [{"id": "a", "tool": "text.upper", "args": {"text": "${steps.nope.output}"}}]
    result = _run(tmp_path, steps, {"text.upper": "execute"})
    episode = result.episode
    assert episode["status"] == "failed"
    assert episode["failure"] == {
        "call_index": -1,
        "tool": "workflow",
        "error_class": "runner.wire.errors.WorkflowError",
    }
    assert "steps.nope.output" in episode["error"]["message"]
    assert result.calls == []


def test_odd_and_huge_bodies_are_stored_reversibly(tmp_path: Path) -> None:
    from runner.trace.format import decode_body

    steps = [
        {"id": "odd", "tool": "text.odd", "args": {}},
        {"id": "big", "tool": "text.odd", "args": {"size": 2_000_000}},
    ]
    result = _run(tmp_path, steps, {"text.odd": "execute"})
    assert result.episode["status"] == "succeeded"
    odd, big = result.calls
    expected = json.dumps(
        "emoji \U0001f600 CJK \u6f22\u5b57 lone \udcff end",
        ensure_ascii=False,
        separators=(",", ":"),
    )
    assert odd["body_encoding"] == "base64"  # a lone surrogate is not UTF-8 text
    # traceformat's rule: a lone surrogate in U+DC80..U+DCFF is a byte carried by surrogateescape
    assert decode_body(odd).decode("utf-8", "surrogateescape") == expected
    assert big["truncated"] is True and big["original_length"] == 2_000_002
    assert len(big["sha256"]) == 64 and big["body_encoding"] == "text"


def test_a_manifest_only_tool_is_served_from_observations(tmp_path: Path) -> None:
    steps = [{"id": "crm", "tool": "crm.lookup", "args": {"email": "${task.email}"}}]
    result = _run(
        tmp_path,
        steps,
        {"crm.lookup": "recorded"},
        task_input={"email": "a@b.c"},
        observations=[_obs("crm.lookup", {"email": "a@b.c"}, {"tier": "gold"})],
        modules=(),
    )
    assert result.episode["output"] == {"tier": "gold"}
    assert result.calls[0]["source"] == "observation"
