"""Recording never changes the agent (issue 27): values JSON cannot encode, recorder failures,
tool errors an agent caught; the ``encoding`` marker and ``tool_errors`` read back and linted."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import pydantic
import pytest
from jsonschema import Draft202012Validator  # type: ignore[import-untyped]

from runner import sdk
from runner.trace.jsonform import json_form, revive
from runner.trace.writer import TraceWriter
from runner.tracetools.lint import lint_trace
from runner.tracetools.reader import load_trace
from tests.support.paths import REPO

SCHEMA = Draft202012Validator(
    json.loads((REPO / "docs" / "trace.schema.json").read_text(encoding="utf-8"))
)


class Weather(pydantic.BaseModel):
    city: str
    temperature_c: float
    when: Any = None


@dataclasses.dataclass
class Hit:
    title: str
    score: float


class Opaque:
    def __repr__(self) -> str:
        return "Opaque<42>"


class BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


@sdk.tool("w.get", effect=sdk.Effect.READ)
def _weather(city: str) -> Weather:
    return Weather(city=city, temperature_c=21.5)


@sdk.tool("kb.hits", effect=sdk.Effect.READ)
def _hits(query: str) -> dict:
    return {"hits": [Hit(title=query, score=0.5)]}


@sdk.tool("x.opaque", effect=sdk.Effect.PURE)
def _opaque(key: str) -> Any:
    return Opaque()


@sdk.tool("x.fails", effect=sdk.Effect.PURE)
def _fails(key: str) -> int:
    raise LookupError(f"no {key}")


@sdk.tool("x.badstr", effect=sdk.Effect.PURE)
def _badstr(key: str) -> int:
    raise BadStr()


def _lines(path: Path) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for line in lines:  # the published schema knows the new fields
        assert not [e.message for e in SCHEMA.iter_errors(line)], line
    return lines


def test_a_pydantic_value_is_recorded_as_its_json_form_and_the_agent_gets_the_model(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "run.jsonl"
    with sdk.record(trace, task_id="t-1") as rec:
        value = _weather(city="Oslo")
        hits = _hits(query="refund")
        rec.set_output(value)  # an output with a JSON form: no TypeError either
    assert isinstance(value, Weather) and value.city == "Oslo"  # the agent's value, untouched
    assert isinstance(hits["hits"][0], Hit)
    lines = _lines(trace)
    weather, kb = lines[1], lines[2]
    assert json.loads(weather["body"]) == {"city": "Oslo", "temperature_c": 21.5, "when": None}
    assert weather["encoding"] == "json_form" and "error" not in weather
    assert json.loads(kb["body"]) == {"hits": [{"title": "refund", "score": 0.5}]}
    assert kb["encoding"] == "json_form"
    assert lines[-1]["status"] == "succeeded" and "tool_errors" not in lines[-1]
    assert lines[-1]["output"] == {"city": "Oslo", "temperature_c": 21.5, "when": None}
    assert load_trace(trace).calls[0].encoding == "json_form"
    checked = lint_trace(trace)
    assert all(c.fields["body"].status == "ok" for c in checked.calls)


def test_a_value_with_no_json_form_is_its_repr_marked_and_lint_reports_it(tmp_path: Path) -> None:
    trace = tmp_path / "run.jsonl"
    with sdk.record(trace, task_id="t-1"):
        value = _opaque(key="k")
    assert isinstance(value, Opaque)
    call = _lines(trace)[1]
    assert call["encoding"] == "repr" and json.loads(call["body"]) == "Opaque<42>"
    checked = lint_trace(trace)
    assert checked.calls[0].fields["body"].status == "missing"
    assert "repr" in checked.calls[0].fields["body"].detail


def test_a_tool_error_the_agent_caught_is_recorded_and_named_on_the_end_line(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "run.jsonl"
    with sdk.record(trace, task_id="t-1"):
        with pytest.raises(LookupError, match="no k"):
            _fails(key="k")
        with pytest.raises(BadStr):  # the agent gets its own exception, not the recorder's
            _badstr(key="k")
        _weather(city="Rome")
    lines = _lines(trace)
    assert lines[1]["error"] == {"class": "LookupError", "message": "no k"}
    assert lines[2]["error"]["class"].endswith("BadStr")
    assert "str() raised" in lines[2]["error"]["message"]
    end = lines[-1]
    assert end["status"] == "succeeded"
    assert end["tool_errors"]["count"] == 2
    assert [c["call_index"] for c in end["tool_errors"]["calls"]] == [0, 1]
    assert [c["tool"] for c in end["tool_errors"]["calls"]] == ["x.fails", "x.badstr"]
    assert load_trace(trace).end is not None
    assert load_trace(trace).end.tool_errors.count == 2  # type: ignore[union-attr]


def test_a_trace_that_cannot_be_written_warns_and_never_raises_into_the_agent(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "missing-folder" / "run.jsonl"
    with (
        pytest.warns(RuntimeWarning, match="could not write"),
        sdk.record(trace, task_id="t-1") as rec,
    ):
        _weather(city="Oslo")
    assert rec.write_error is not None and not trace.exists()


def test_the_host_writer_names_failed_tool_calls_on_the_end_line(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TraceWriter(path) as writer:
        writer.call({"index": 0, "tool": "a.b", "args": {}, "error": {"class": "E", "message": ""}})
        writer.call({"index": 1, "tool": "model", "request": {}, "error": {"class": "M"}})
        writer.end({"status": "succeeded"})
    end = json.loads(path.read_text(encoding="utf-8").splitlines()[-1])
    assert end["tool_errors"] == {
        "count": 1,
        "calls": [{"call_index": 0, "tool": "a.b", "error_class": "E"}],
    }


@pytest.mark.parametrize(
    ("value", "encoding"),
    [
        ({"a": [1, "x"]}, None),
        ({"m": Weather(city="c", temperature_c=1.0)}, "json_form"),
        (Hit(title="t", score=1.0), "json_form"),
        ({"x": math.nan}, "repr"),
        ({1, 2}, "repr"),
        (Opaque(), "repr"),
    ],
)
def test_json_form_encodes_by_the_rule(value: Any, encoding: str | None) -> None:
    text, got = json_form(value)
    assert got == encoding
    json.loads(text)  # always JSON text


def test_json_form_of_a_cycle_and_a_deep_value_is_a_repr() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    assert json_form(cycle)[1] == "repr"
    deep: Any = "x"
    for _ in range(100):
        deep = [deep]
    assert json_form(deep)[1] == "repr"


def test_revive_rebuilds_the_declared_class_and_keeps_what_it_refuses() -> None:
    assert revive({"city": "c", "temperature_c": 2}, Weather) == Weather(city="c", temperature_c=2)
    assert revive({"title": "t", "score": 1.0}, Hit) == Hit(title="t", score=1.0)
    assert revive({"nope": 1}, Weather) == {"nope": 1}
    assert revive({"a": 1}, dict) == {"a": 1}
    assert revive([1], None) == [1]


def test_record_hashes_the_agent_code_and_lists_the_sdks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from runner.reproduce.envdiff import environment_diff

    (tmp_path / "my_agent.py").write_text("import my_loop\n\ndef run(x):\n    return 1\n")
    (tmp_path / "my_loop.py").write_text("X = 1\n")
    (tmp_path / "wf.yaml").write_text(
        'name: w\nversion: "1"\nsteps:\n  - {id: a, program: "my_agent:run"}\n'
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import my_agent

    trace = tmp_path / "run.jsonl"
    with sdk.record(trace, task_id="t-1", workflow=str(tmp_path / "wf.yaml")):
        my_agent.run({})
    environment = _lines(trace)[0]["environment"]
    assert sorted(environment["agent_code"]) == ["my_agent.py", "my_loop.py"]
    assert environment["packages"]["pydantic"] == pydantic.VERSION
    changed = {**environment["agent_code"], "my_loop.py": "0" * 64}
    diff = environment_diff(environment, {**environment, "agent_code": changed}, "h", "h", [], [])
    assert [d["field"] for d in diff] == ["agent_code.my_loop.py"]
    older = {k: v for k, v in environment.items() if k != "agent_code"}
    assert environment_diff(environment, older, "h", "h", [], []) == []  # nothing to compare
    sys.modules.pop("my_agent", None)
    sys.modules.pop("my_loop", None)
