"""`sandbox-replay import otel` on bad input: an error or a warning naming span id and file.

Truncated JSON, span cycles, parents never exported, missing roots, attributes of the wrong
type, a document over the size limit, a session too large to import, a malformed session among
good ones, hostile text printed inert: never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import structlog
from typer.testing import CliRunner

from runner.cli.app import app
from runner.errors import InputError
from runner.importers.otel import files as files_module
from runner.importers.otel import read_otel
from tests.support.otel_shapes import render
from tests.unit.importers.test_import_otel import (
    EXPECTED,
    T1,
    T2,
    S,
    genai_session,
    imported,
    openinference_session,
    span,
    summary,
)

T3 = "5bf92f3577b34da6a3ce929d0e0e4737"


@pytest.fixture(autouse=True)
def _fresh_logging() -> Any:
    yield
    structlog.reset_defaults()


def test_truncated_json_is_an_error_naming_file_and_line(tmp_path: Path) -> None:
    good = render(genai_session(), "otlp", tmp_path / "whole.json").read_text("utf-8")
    bad = tmp_path / "cut.json"
    bad.write_text(good[: len(good) // 2], encoding="utf-8")
    with pytest.raises(InputError, match=r"cut\.json:\d+: invalid JSON \(truncated\?\)"):
        read_otel([bad])
    lines = (
        render(genai_session(), "span-jsonl", tmp_path / "cut.jsonl")
        .read_text("utf-8")
        .splitlines()
    )
    (tmp_path / "cut.jsonl").write_text(
        "\n".join(lines[:-1]) + "\n" + lines[-1][:40], encoding="utf-8"
    )
    with pytest.raises(InputError, match=rf"cut\.jsonl:{len(lines)}: invalid JSON"):
        read_otel([tmp_path / "cut.jsonl"])


def test_cycle_missing_parent_and_missing_root_are_warnings_naming_the_span(tmp_path: Path) -> None:
    spans = genai_session()
    spans[0]["parent"] = "a000000000000004"  # the agent span under the chat span under it: a cycle
    spans[4]["parent"] = "ffffffffffffffff"  # trace 2's root names a parent never exported
    source = render(spans, "otlp", tmp_path / "broken.json")
    got = imported(tmp_path, [source])
    notes = "\n".join(got["report"]["notes"])
    assert "span a000000000000001" in notes and "cycle" in notes and "broken.json" in notes
    assert (
        "parent span ffffffffffffffff was never exported" in notes
        and "span b000000000000001" in notes
    )
    assert f"trace {T2}: its root span was never exported" in notes
    assert summary(got["traces"]["conv-1"]) == EXPECTED  # the session is still read


def test_attribute_of_the_wrong_type_is_a_warning(tmp_path: Path) -> None:
    spans = genai_session()
    spans[1]["attrs"]["gen_ai.usage.input_tokens"] = "many"
    spans[1]["attrs"]["gen_ai.input.messages"] = "not json"
    spans[1]["attrs"]["gen_ai.response.model"] = 7
    source = render(spans, "otlp", tmp_path / "typed.json")
    got = imported(tmp_path, [source])
    notes = "\n".join(got["report"]["notes"])
    for attr in ("gen_ai.usage.input_tokens", "gen_ai.input.messages", "gen_ai.response.model"):
        assert f"span a000000000000002 (trace {T1}): attribute {attr}" in notes
    assert "typed.json" in notes
    assert got["traces"]["conv-1"][-1]["meter"]["tokens_in"] == 50


def test_a_document_over_the_size_limit_says_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = render(genai_session(), "otlp", tmp_path / "big.json")
    monkeypatch.setattr(files_module, "MAX_DOCUMENT_BYTES", 1000)
    with pytest.raises(InputError, match="at most 1000 are read whole"):
        read_otel([source])


def test_no_model_or_tool_span_is_an_error_naming_what_was_found(tmp_path: Path) -> None:
    source = render(
        [span(T1, "f000000000000001", None, "GET /", 0, 1)], "otlp", tmp_path / "http.json"
    )
    with pytest.raises(InputError, match="no agent session: no span of a known family") as got:
        read_otel([source])
    assert "spans found: unknown:" in str(got.value)


def test_large_session_is_read_and_skipped_by_name(tmp_path: Path) -> None:
    """20,000 spans in one session (the bench runs 100,000): read without recursion, then
    skipped with a warning naming session, span and file (its trace would be quadratic)."""
    large = tmp_path / "large.jsonl"
    with large.open("w", encoding="utf-8") as out:
        for line in _many_spans(20_000):
            out.write(line + "\n")
    small = render(genai_session(), "span-jsonl", tmp_path / "small.jsonl")
    source = read_otel([large, small])
    assert [r.run_id for r in source.runs] == ["conv-1"]
    note = next(n for n in source.notes if "model calls, more than" in n)
    assert "large.jsonl" in note and "first model span 0000000000000001" in note
    assert f"session trace {T3}" in note
    with pytest.raises(InputError, match="more than the 1000"):
        read_otel([large])


def _many_spans(n: int) -> Any:
    parent = "1" * 16
    yield json.dumps(
        {
            "traceId": T3,
            "spanId": parent,
            "name": "root",
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "invoke_agent"}}
            ],
        }
    )
    for i in range(1, n):
        sid = f"{i:016x}"
        if i % 2:
            attrs = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "m",
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [
                                {
                                    "type": "tool_call",
                                    "id": f"c{i}",
                                    "name": "step",
                                    "arguments": {"i": i},
                                }
                            ],
                        }
                    ]
                ),
            }
        else:
            attrs = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "step",
                "gen_ai.tool.call.id": f"c{i - 1}",
                "gen_ai.tool.call.result": "ok",
            }
        yield json.dumps(
            {
                "traceId": T3,
                "spanId": sid,
                "parentSpanId": parent,
                "name": "s",
                "startTimeUnixNano": str(S + i),
                "endTimeUnixNano": str(S + i + 1),
                "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attrs.items()],
            }
        )
    yield json.dumps(
        {
            "traceId": T3,
            "spanId": f"{n:016x}",
            "parentSpanId": parent,
            "name": "s",
            "startTimeUnixNano": str(S + n),
            "attributes": [
                {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
                {"key": "gen_ai.request.model", "value": {"stringValue": "m"}},
            ],
        }
    )


def test_cli_bad_input_exits_2_without_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"resourceSpans": [', encoding="utf-8")
    result = CliRunner().invoke(app, ["import", "otel", str(bad), "--out", str(tmp_path / "o")])
    assert result.exit_code == 2, result.output
    assert "bad.json" in result.output and "Traceback" not in result.output


def test_cli_imports_and_prints_warnings(tmp_path: Path) -> None:
    spans = genai_session()
    spans[4]["parent"] = "ffffffffffffffff"
    source = render(spans, "jaeger", tmp_path / "jaeger.json")
    result = CliRunner().invoke(
        app,
        ["import", "otel", str(source), "--out", str(tmp_path / "o"), "--map", "get_weather=read"],
    )
    assert result.exit_code == 0, result.output
    assert "imported 1 run (" in result.output and "never exported" in result.output
    manifest = json.loads((tmp_path / "o" / "tools.manifest.json").read_text("utf-8"))
    assert manifest["tools"][0]["effect"] == "read"


def test_a_malformed_session_is_skipped_by_name_and_the_others_import(tmp_path: Path) -> None:
    bad = openinference_session()
    for s in bad:
        for key in list(s["attrs"]):
            if key.endswith("function.name"):
                s["attrs"][key] = "."  # no tool id can be made of it
    files = [
        render(genai_session(), "otlp", tmp_path / "good.json"),
        render(bad, "otlp", tmp_path / "bad.json"),
    ]
    got = imported(tmp_path, files)
    assert list(got["traces"]) == ["conv-1"]
    (note,) = [n for n in got["report"]["notes"] if "skipped" in n]
    assert "session session s-9 skipped" in note and "bad.json" in note


def test_a_tool_name_that_is_no_tool_id_is_renamed_and_printed_inert(tmp_path: Path) -> None:
    odd = openinference_session()
    for s in odd:
        for key in list(s["attrs"]):
            if key.endswith("function.name"):
                s["attrs"][key] = "get weather\x1b[2J"  # not a tool id, with a terminal escape
    source = render(odd, "otlp", tmp_path / "odd.json")
    got = imported(tmp_path, [source])
    (lines,) = got["traces"].values()
    assert "get_weather__2J" in {x.get("tool") for x in lines}
    result = CliRunner().invoke(
        app, ["import", "otel", str(source), "--out", str(tmp_path / "cli")]
    )
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output  # nothing of the name reaches the terminal raw
    manifest = json.loads((tmp_path / "cli" / "tools.manifest.json").read_text("utf-8"))
    assert "get_weather__2J" in {tool["id"] for tool in manifest["tools"]}


@pytest.mark.parametrize("where", ["resourceSpans", "scopeSpans", "spans"])
@pytest.mark.parametrize("value", [7, True, "text"])
def test_a_span_container_of_the_wrong_type_is_skipped_not_a_traceback(
    tmp_path: Path, where: str, value: Any
) -> None:
    """Review round four: ``"spans": 7`` (or a resource's ``scopeSpans``, or the document's
    ``resourceSpans``) raised TypeError out of ``import otel``, exit 1."""
    doc: dict[str, Any] = {"resourceSpans": [{"scopeSpans": [{"spans": []}]}]}
    if where == "resourceSpans":
        doc["resourceSpans"] = value
    elif where == "scopeSpans":
        doc["resourceSpans"][0]["scopeSpans"] = value
    else:
        doc["resourceSpans"][0]["scopeSpans"][0]["spans"] = value
    source = tmp_path / "bad.json"
    source.write_text(json.dumps(doc))
    done = CliRunner().invoke(app, ["import", "otel", str(source), "--out", str(tmp_path / "o")])
    assert done.exception is None or isinstance(done.exception, SystemExit), done.exception
    assert done.exit_code == 2 and "bad.json" in done.output, done.output[-500:]
