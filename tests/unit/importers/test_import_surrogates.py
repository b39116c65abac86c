"""Attack test: a lone surrogate in an import source was a traceback; --force lost data.

The strict decoder accepts the JSON escape ``"\\ud800"`` (a lone surrogate: valid JSON text,
not encodable as UTF-8). Every importer then hands it to `runner.importers.output.write_import`,
which writes with ``encoding="utf-8"`` and dies with ``UnicodeEncodeError``: a Python
traceback, exit 1, and a half-written ``--out`` folder (the trace file of the run is empty).
With ``--force`` over an earlier import, the earlier traces were unlinked first: a bad line
destroys data the user had. ``tasks extract`` already handles the same value
(`tests/unit/test_hostile_input.py::test_tasks_extract_of_a_trace_holding_a_lone_surrogate`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import structlog
from typer.testing import CliRunner

from runner.cli.app import app
from tests.support.paths import REPO

FIXTURES = REPO / "tests" / "fixtures" / "import"
LONE = "\\ud800"  # the six characters of the JSON escape


@pytest.fixture(autouse=True)
def _fresh_logging() -> object:
    yield
    structlog.reset_defaults()


def _chat(path: Path, content: str) -> Path:
    messages = [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": "CONTENT"},
    ]
    path.write_text(
        json.dumps({"messages": messages}).replace("CONTENT", content) + "\n", encoding="utf-8"
    )
    return path


def _invoke(*args: str) -> tuple[int, BaseException | None, str]:
    result = CliRunner().invoke(app, list(args))
    unexpected = result.exception if not isinstance(result.exception, SystemExit) else None
    return result.exit_code, unexpected, result.output


def _tau2(tmp_path: Path) -> Path:
    folder = tmp_path / "tau2"
    shutil.copytree(FIXTURES / "tau2-mini", folder)
    results = folder / "results.json"
    text = results.read_text(encoding="utf-8")
    at = text.index('"content": "') + len('"content": "')
    results.write_text(text[:at] + LONE + text[at:], encoding="utf-8")
    return results


def test_openai_messages_lone_surrogate_is_exit_2_not_a_traceback(tmp_path: Path) -> None:
    source = _chat(tmp_path / "chat.jsonl", "bad " + LONE)
    code, error, output = _invoke(
        "import", "openai-messages", str(source), "--out", str(tmp_path / "out")
    )
    assert error is None, repr(error)[:200]
    assert code == 2 and "chat.jsonl" in output


def test_tau2_lone_surrogate_is_exit_2_not_a_traceback(tmp_path: Path) -> None:
    source = _tau2(tmp_path)
    code, error, _ = _invoke("import", "tau2", str(source), "--out", str(tmp_path / "out"))
    assert error is None, repr(error)[:200]
    assert code == 2


def test_a_failed_forced_import_keeps_the_earlier_traces(tmp_path: Path) -> None:
    out = tmp_path / "out"
    good = _chat(tmp_path / "good.jsonl", "fine")
    code, error, _ = _invoke("import", "openai-messages", str(good), "--out", str(out))
    assert code == 0 and error is None
    before = {p.name: p.read_bytes() for p in (out / "traces").glob("*.jsonl")}
    assert before and all(before.values())
    bad = _chat(tmp_path / "bad.jsonl", "bad " + LONE)
    _invoke("import", "openai-messages", str(bad), "--out", str(out), "--force")
    after = {p.name: p.read_bytes() for p in (out / "traces").glob("*.jsonl")}
    assert after == before  # a refused import changes nothing


def test_otel_lone_surrogate_is_exit_2_not_a_traceback(tmp_path: Path) -> None:
    from tests.support.otel_shapes import render
    from tests.unit.importers.test_import_otel import genai_session

    source = render(genai_session(), "otlp", tmp_path / "otel.json")
    text = source.read_text(encoding="utf-8").replace("Weather in Paris?", "Weather " + LONE)
    source.write_text(text, encoding="utf-8")
    code, error, _ = _invoke("import", "otel", str(source), "--out", str(tmp_path / "out"))
    assert error is None, repr(error)[:200]
    assert code == 2
